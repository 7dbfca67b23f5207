import {
  type Attributes,
  type Context,
  type Histogram,
  type Meter,
  type ObservableUpDownCounter,
  type Span,
  type Tracer,
  createNoopMeter,
  INVALID_SPAN_CONTEXT,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { inject, injectable } from 'tsyringe';
import { activeContext, contextOfHeaders, contextOfTraceparent, continuedContext, currentTraceparent, runInContext, traceHeaders, traceparentOf } from './trace-context.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { TOKENS } from './tokens.js';
import type { Clock } from './ports/clock.js';
import { RecentMean } from './domain/recent-mean.js';

export { activeContext, contextOfHeaders, contextOfTraceparent, continuedContext, currentTraceparent, traceHeaders, traceparentOf };

/** The class of the API's no-op meter (what `getMeter` answers while no meter provider is registered). */
const NOOP_METER_CLASS = createNoopMeter().constructor;

/** The instrumentation scope of every metric and span genservice makes. */
export const TELEMETRY_SCOPE = 'genservice';

/** Histogram buckets in seconds: from a fast text model to a long video. */
const SECONDS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/**
 * Every metric genservice records, by the name Prometheus shows (counters get `_total` from the exporter; no unit is
 * appended because each name already ends in its unit, or the unit is an annotation in braces). The docs and the
 * dashboard test read this list.
 */
export const METRIC_NAMES = [
  'genservice_generations_created_total',
  'genservice_generations_finished_total',
  'genservice_generation_run_seconds',
  'genservice_queue_wait_seconds',
  'genservice_generations_in_flight',
  'genservice_tokens_charged_total',
  'genservice_webhook_deliveries_total',
  'genservice_webhook_delivery_seconds',
  'genservice_event_streams_open',
  'genservice_http_requests_total',
] as const;

/**
 * Counts by label set, kept here and handed to the SDK at each collection (an observable counter): a request adds
 * one to a number in a map instead of having the SDK hash its attributes. The label sets are few (routes x statuses,
 * models x codes), so the map stays small.
 */
class Tally {
  private readonly counts = new Map<string, TallyEntry>();
  private readonly entries: TallyEntry[] = [];

  add(key: string, attributes: () => Attributes, by = 1): void {
    const entry = this.counts.get(key);
    if (entry) entry.value += by;
    else this.counts.set(key, this.entry(attributes(), by));
  }

  /** A new label set's count, reported from now on (for a caller that keeps its entries by its own keys). */
  entry(attributes: Attributes, value = 0): TallyEntry {
    const entry = { attributes, value };
    this.entries.push(entry);
    return entry;
  }

  readonly report = (result: { observe(value: number, attributes?: Attributes): void }): void => {
    for (const { attributes, value } of this.entries) result.observe(value, attributes);
  };
}

interface TallyEntry {
  readonly attributes: Attributes;
  value: number;
}

/**
 * Metrics and spans, through the OpenTelemetry API only: without an SDK registered (or providers given in the
 * `telemetry` option) every instrument is a no-op and every span a non-recording one.
 */
@injectable()
export class Telemetry {
  readonly tracer: Tracer;
  private readonly created = new Tally();
  private readonly finished = new Tally();
  private readonly tokens = new Tally();
  private readonly deliveries = new Tally();
  private readonly http = new Tally();
  private readonly httpByRoute = new Map<string, Map<number, TallyEntry>>();
  private inFlight = 0;
  private readonly clock: Clock;
  /** This instance's recent run times (ms), for the queue's wait estimate. */
  private readonly recentRuns = new RecentMean(50);
  private readonly runSeconds: Histogram;
  private readonly queueWaitSeconds: Histogram;
  private readonly deliverySeconds: Histogram;
  private readonly streams: ObservableUpDownCounter;
  private streamsCallback: (() => number) | undefined;
  /** One attributes object per model, for the histograms. */
  private readonly models = new Map<string, Attributes>();

  /** False with the API's no-op meter: the counts and histograms below would never be read. */
  private readonly metered: boolean;

  constructor(@inject(TOKENS.Options) options: ResolvedServiceOptions) {
    this.clock = options.clock;
    const meter: Meter = (options.telemetry.meterProvider ?? metrics.getMeterProvider()).getMeter(TELEMETRY_SCOPE);
    // The API's no-op meter (no `telemetry.meterProvider`, none registered globally): its callbacks are never asked,
    // so nothing is counted per generation or request (issue 36). Decided once: instruments are made here, once.
    this.metered = meter.constructor !== NOOP_METER_CLASS;
    this.tracer = (options.telemetry.tracerProvider ?? trace.getTracerProvider()).getTracer(TELEMETRY_SCOPE);
    const seconds = { unit: 's', advice: { explicitBucketBoundaries: SECONDS_BUCKETS } };
    const counter = (name: string, description: string, unit: string, tally: Tally): void => {
      meter.createObservableCounter(name, { description, unit }).addCallback(tally.report);
    };
    counter('genservice_generations_created', 'Generations created (accepted and queued).', '{generation}', this.created);
    counter('genservice_generations_finished', 'Generations finished, by status (completed, failed) and failure code (empty when completed).', '{generation}', this.finished);
    counter('genservice_tokens_charged', 'Tokens (credits) charged for finished generations.', '{token}', this.tokens);
    counter('genservice_webhook_deliveries', 'Webhook delivery attempts, by outcome (delivered, retry, failed, gone).', '{attempt}', this.deliveries);
    counter('genservice_http_requests', 'HTTP requests answered, by route template and status.', '{request}', this.http);
    this.runSeconds = meter.createHistogram('genservice_generation_run_seconds', { description: 'Time from the first start of a run to its end.', ...seconds });
    this.queueWaitSeconds = meter.createHistogram('genservice_queue_wait_seconds', { description: 'Time from create to the first start of its run.', ...seconds });
    this.deliverySeconds = meter.createHistogram('genservice_webhook_delivery_seconds', { description: 'Duration of one webhook delivery attempt.', ...seconds });
    meter
      .createObservableUpDownCounter('genservice_generations_in_flight', { description: 'Generations this instance is running now.', unit: '{generation}' })
      .addCallback((result) => result.observe(this.inFlight));
    this.streams = meter.createObservableUpDownCounter('genservice_event_streams_open', { description: 'Event streams open on this instance.', unit: '{stream}' });
  }

  /** Reports `count()` as the open event streams at each collection. */
  observeStreams(count: () => number): void {
    if (this.streamsCallback) return;
    this.streamsCallback = count;
    this.streams.addCallback(this.reportStreams);
  }

  private readonly reportStreams = (result: { observe(value: number): void }): void => {
    if (this.streamsCallback) result.observe(this.streamsCallback());
  };

  private model(modelId: string): Attributes {
    let attributes = this.models.get(modelId);
    if (!attributes) this.models.set(modelId, (attributes = { model: modelId }));
    return attributes;
  }

  generationCreated(modelId: string): void {
    if (this.metered) this.created.add(modelId, () => this.model(modelId));
  }

  /** A run's first start: how long it waited. */
  runStarted(modelId: string, waitedMs: number): void {
    if (this.metered) this.queueWaitSeconds.record(Math.max(0, waitedMs) / 1000, this.model(modelId));
  }

  generationFinished(modelId: string, status: 'completed' | 'failed', code: string, price: number, runMs: number | undefined): void {
    if (!this.metered) return;
    this.finished.add(`${modelId}\n${status}\n${code}`, () => ({ model: modelId, status, code }));
    if (price > 0) this.tokens.add(modelId, () => this.model(modelId), price);
    if (runMs !== undefined) this.runSeconds.record(Math.max(0, runMs) / 1000, this.model(modelId));
  }

  /**
   * A run starts (the running gauge); the answer ends it, and its time joins this instance's recent run times (the
   * queue position's wait estimate: `recentRunMs`).
   */
  running(): () => void {
    this.inFlight += 1;
    const from = this.clock.now();
    return () => {
      this.inFlight -= 1;
      this.recentRuns.record(this.clock.now() - from);
    };
  }

  /** The mean time of this instance's last 50 runs (ms); undefined before the first. */
  get recentRunMs(): number | undefined {
    return this.recentRuns.mean;
  }

  webhookDelivery(outcome: string, ms: number): void {
    if (!this.metered) return;
    this.deliveries.add(outcome, () => ({ outcome }));
    this.deliverySeconds.record(Math.max(0, ms) / 1000);
  }

  httpRequest(route: string, status: number): void {
    if (!this.metered) return;
    // By route, then status: no key string is built per request.
    let byStatus = this.httpByRoute.get(route);
    if (!byStatus) this.httpByRoute.set(route, (byStatus = new Map()));
    const entry = byStatus.get(status);
    if (entry) entry.value++;
    else byStatus.set(status, this.http.entry({ route, status }, 1));
  }

  /**
   * Runs `fn` in a new span (a child of `parent`, else of the active span); the span ends when `fn` settles, with
   * an error status when it throws. The span is active while `fn` runs, also across its awaits when the host has no
   * context manager of its own (a `telemetry.tracerProvider` without a registered SDK): a span made inside, and a
   * provider's `currentTraceparent()`, see it as their parent.
   */
  inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>, parent?: Context, kind: SpanKind = SpanKind.INTERNAL): Promise<T> {
    const ctx = parent ?? activeContext();
    const span = this.tracer.startSpan(name, { attributes, kind }, ctx);
    const spanContext = span.spanContext();
    // The API's no-op span without a parent is the one invalid context object: known without its ids' pattern tests.
    if (!span.isRecording() && (spanContext === INVALID_SPAN_CONTEXT || !trace.isSpanContextValid(spanContext))) {
      // No tracer records it and no trace goes on through it (issue 36, pay for what you use): the context it would
      // be entered in is the one already active, so no context is entered and no promise step added.
      try {
        return fn(span);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return runInContext(trace.setSpan(ctx, span), () => {
      try {
        return fn(span);
      } catch (err) {
        return Promise.reject(err);
      }
    }).then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
        throw err;
      },
    );
  }
}
