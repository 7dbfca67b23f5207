/**
 * genservice's metrics in Prometheus text format, for a host that wants a `GET /metrics` without setting up an
 * OpenTelemetry SDK of its own: an OpenTelemetry MeterProvider whose only reader is a pull exporter, and a request
 * handler that answers a scrape.
 *
 * @example
 * const prom = createPrometheusMetrics();
 * const service = createGenerationService({ providers, telemetry: { meterProvider: prom.meterProvider } });
 * app.get('/metrics', prom.handler); // outside the genservice mount, and not public
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/** The Content-Type of Prometheus' text exposition format. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface PrometheusMetricsOptions {
  /**
   * Also register the MeterProvider as the process' global one (`metrics.setGlobalMeterProvider`), so a service
   * created without the `telemetry` option (and any other library on the OpenTelemetry API) reports to it. Default
   * false. Register before the service is created: instruments are taken from the provider at creation.
   */
  global?: boolean;
}

export interface PrometheusMetrics {
  /** Pass as `telemetry.meterProvider` to `createGenerationService`. */
  readonly meterProvider: MeterProvider;
  /** Every metric, in Prometheus text format (collected now). */
  scrape(): Promise<string>;
  /** A Node request handler (Express, Koa's `ctx.req/res`, `http.createServer`) answering a scrape with 200 and the text. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** Stops the provider (a final collection is not exported anywhere). */
  shutdown(): Promise<void>;
}

/** Makes a MeterProvider that Prometheus can scrape through `handler` (see the module example). */
export function createPrometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  // preventServerStart: the host serves the text on its own server, under its own route and access rules.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [exporter] });
  if (options.global) metrics.setGlobalMeterProvider(meterProvider);
  const serializer = new PrometheusSerializer();
  const scrape = async (): Promise<string> => {
    const { resourceMetrics } = await exporter.collect();
    return serializer.serialize(resourceMetrics);
  };
  const handler = (_req: IncomingMessage, res: ServerResponse): void => {
    scrape().then(
      (text) => {
        res.statusCode = 200;
        res.setHeader('content-type', PROMETHEUS_CONTENT_TYPE);
        res.setHeader('cache-control', 'no-store');
        res.end(text);
      },
      () => {
        res.statusCode = 500;
        res.setHeader('content-type', 'text/plain; charset=utf-8');
        res.end('# metrics collection failed\n');
      },
    );
  };
  return { meterProvider, scrape, handler, shutdown: () => meterProvider.shutdown() };
}
