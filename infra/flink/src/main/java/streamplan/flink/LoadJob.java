package streamplan.flink;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * Load job for streamplan: a rate-limited source and three keyed operators (parse, enrich,
 * aggregate) with a configurable per-record cost (microseconds) and selectivity (output
 * records per input record), on an embedded cluster whose REST API listens on 127.0.0.1.
 *
 * <p>The cost is wall time: {@code cost=sleep} (default) parks the task thread, so an
 * operator behaves like one with that service time on a dedicated core whatever else runs
 * on the machine; {@code cost=spin} burns CPU for it instead.
 *
 * <p>Arguments are {@code key=value}: {@code rate} (records/s, whole job), {@code port},
 * {@code slots}, {@code parallelism} (default of every vertex but the source, which stays
 * at 1), {@code keys}, {@code cost}, and per operator {@code <op>.cost_us} and
 * {@code <op>.selectivity}.
 * Any argument starting with {@code -D} is a Flink configuration entry, e.g.
 * {@code -Dpipeline.jobvertex-parallelism-overrides=<vertex id>:<parallelism>,...}.
 */
public final class LoadJob {
    static final String[] OPERATORS = {"parse", "enrich", "aggregate"};

    private LoadJob() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        Map<String, String> flink = new HashMap<>();
        for (String arg : args) {
            boolean isFlink = arg.startsWith("-D");
            String body = isFlink ? arg.substring(2) : arg;
            int eq = body.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("argument must be key=value: " + arg);
            }
            (isFlink ? flink : opts).put(body.substring(0, eq), body.substring(eq + 1));
        }
        Configuration conf = Configuration.fromMap(flink);
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.PORT, Integer.parseInt(opts.getOrDefault("port", "8081")));
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, Integer.parseInt(opts.getOrDefault("slots", "8")));

        // Flink 2.3 applies pipeline.jobvertex-parallelism-overrides when a JobGraph is
        // submitted, but a local environment submits a StreamGraph and skips them. Vertex ids
        // are hashes of the operators' uids, so compute them on a dry build and apply the
        // overrides as per-operator parallelism.
        Map<String, Integer> byName = new HashMap<>();
        Map<String, String> overrides = conf.get(PipelineOptions.PARALLELISM_OVERRIDES);
        if (!overrides.isEmpty()) {
            StreamExecutionEnvironment dry = StreamExecutionEnvironment.getExecutionEnvironment();
            build(dry, opts, byName);
            for (JobVertex vertex : dry.getStreamGraph().getJobGraph().getVertices()) {
                String p = overrides.get(vertex.getID().toHexString());
                if (p != null) {
                    byName.put(vertex.getName(), Integer.parseInt(p));
                }
            }
            System.out.println("[streamplan] parallelism overrides by vertex name: " + byName);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironmentWithWebUI(conf);
        build(env, opts, byName);
        env.execute(opts.getOrDefault("name", "streamplan-load"));
    }

    /** The pipeline: source -> parse -> enrich -> aggregate -> sink, keyed between operators;
     *  {@code parallelism} overrides the default for the operators it names. */
    static void build(StreamExecutionEnvironment env, Map<String, String> opts, Map<String, Integer> parallelism) {
        env.setParallelism(Integer.parseInt(opts.getOrDefault("parallelism", "1")));
        env.disableOperatorChaining(); // one job vertex per operator, named after it
        double rate = Double.parseDouble(opts.getOrDefault("rate", "1000"));
        long keys = Long.parseLong(opts.getOrDefault("keys", "1024"));
        boolean spin = opts.getOrDefault("cost", "sleep").equals("spin");

        DataGeneratorSource<Long> source = new DataGeneratorSource<>(
                index -> index, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);
        DataStream<Long> stream = env.fromSource(source, WatermarkStrategy.noWatermarks(), "source")
                .uid("source").name("source").setParallelism(1);
        for (String op : OPERATORS) {
            long costUs = Long.parseLong(opts.getOrDefault(op + ".cost_us", "0"));
            double selectivity = Double.parseDouble(opts.getOrDefault(op + ".selectivity", "1"));
            SingleOutputStreamOperator<Long> next = stream.keyBy(v -> v % keys)
                    .flatMap(new CostlyOperator(costUs, selectivity, spin))
                    .returns(Types.LONG)
                    .uid(op).name(op);
            if (parallelism.containsKey(op)) {
                next.setParallelism(parallelism.get(op));
            }
            stream = next;
        }
        stream.sinkTo(new DiscardingSink<>()).uid("sink").name("sink");
    }

    /** Takes {@code costUs} microseconds of wall time per record (parked or spinning) and
     *  emits on average {@code selectivity} records per input record (deterministic: a
     *  running fractional credit). */
    static final class CostlyOperator implements FlatMapFunction<Long, Long> {
        private final long costNs;
        private final double selectivity;
        private final boolean spin;
        private double credit;

        CostlyOperator(long costUs, double selectivity, boolean spin) {
            this.costNs = costUs * 1000L;
            this.selectivity = selectivity;
            this.spin = spin;
        }

        @Override
        public void flatMap(Long value, Collector<Long> out) {
            long until = System.nanoTime() + costNs;
            for (long left = costNs; left > 0; left = until - System.nanoTime()) {
                if (spin) {
                    Thread.onSpinWait();
                } else {
                    LockSupport.parkNanos(left);
                }
            }
            credit += selectivity;
            for (long i = 0; credit >= 1.0; i++, credit -= 1.0) {
                out.collect(value * 31 + i); // a new key for the next operator
            }
        }
    }
}
