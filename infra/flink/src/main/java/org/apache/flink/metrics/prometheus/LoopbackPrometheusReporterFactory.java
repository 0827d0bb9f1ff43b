package org.apache.flink.metrics.prometheus;

import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

import java.util.Properties;

/**
 * Creates a {@link LoopbackPrometheusReporter}: {@code metrics.reporter.<name>.factory.class}
 * set to this class, {@code .host} (default 127.0.0.1) and {@code .port} (default 9249).
 */
public class LoopbackPrometheusReporterFactory implements MetricReporterFactory {

    @Override
    public MetricReporter createMetricReporter(Properties properties) {
        MetricConfig config = (MetricConfig) properties;
        String host = config.getString("host", "127.0.0.1");
        int port = config.getInteger("port", 9249);
        return new LoopbackPrometheusReporter(host, port);
    }
}
