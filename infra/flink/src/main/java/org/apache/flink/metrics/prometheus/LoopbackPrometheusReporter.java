package org.apache.flink.metrics.prometheus;

import io.prometheus.client.exporter.HTTPServer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;

/**
 * Flink's Prometheus reporter (AbstractPrometheusReporter: Flink's metric names, labels and
 * text exposition) served on one host address instead of all interfaces: streamplan's tests
 * start servers on 127.0.0.1 only. It sits in Flink's package for the reporter's
 * package-private registry; Flink's own PrometheusReporter binds the wildcard address.
 */
public class LoopbackPrometheusReporter extends AbstractPrometheusReporter {

    private final HTTPServer httpServer;

    LoopbackPrometheusReporter(String host, int port) {
        try {
            httpServer = new HTTPServer(new InetSocketAddress(host, port), registry);
        } catch (IOException e) {
            throw new UncheckedIOException(
                    "Prometheus reporter could not listen on " + host + ":" + port, e);
        }
        log.info("Prometheus reporter listening on {}:{}", host, port);
    }

    @Override
    public void close() {
        httpServer.stop();
        super.close();
    }
}
