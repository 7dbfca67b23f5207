import { Webhook } from 'standardwebhooks';
import { inject, injectable } from 'tsyringe';
import { ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { Delivery, DeliveryOutcome, WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { contextOfTraceparent, Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { safeLabel } from '../outbound/guard.js';
import { attemptSucceeded } from '../domain/webhook-endpoints.js';
import { EndpointHealth } from './endpoint-health.js';
import { newWebhookSecret, retryAfterMs, retryDelay, type WebhookResponse, type WebhookTransport } from './webhook-messages.js';

/**
 * Delivery of the outbox: instances claim due deliveries under a lease, so each is attempted by one instance at a
 * time, and a dead instance's are taken over when its lease runs out. Each attempt is signed with the owner's secrets
 * (Standard Webhooks) and its outcome recorded; a failed one is retried on the schedule, a 410 stops the endpoint.
 */
@injectable()
export class WebhookSender {
  private readonly logger: Logger;
  private delivering = 0;
  private deliveringLoop: Promise<void> | undefined;
  private deliverAgain = false;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(TOKENS.WebhookTransport) private readonly transport: WebhookTransport,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(EndpointHealth) private readonly health: EndpointHealth,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'webhooks' });
  }

  start(): void {
    this.running = true;
  }

  /** Stops claiming; deliveries in flight finish (bounded by the request timeout), an interrupted one is retried when its lease ends. */
  async stop(): Promise<void> {
    this.running = false;
    await this.deliveringLoop;
    await Promise.allSettled([...this.inFlight]);
  }

  /** Claims due deliveries up to the concurrency and sends them. Calls during a pass make one more pass after it. */
  deliver(): void {
    if (!this.running || !this.options.webhooks.deliver) return;
    if (this.deliveringLoop) {
      this.deliverAgain = true;
      return;
    }
    this.deliveringLoop = (async () => {
      do {
        this.deliverAgain = false;
        try {
          const room = this.options.webhooks.concurrency - this.delivering;
          if (room <= 0) break;
          const { leaseMs, concurrencyPerEndpoint, concurrencyPerUser } = this.options.webhooks;
          const due = await this.hooks.claimDue(this.options.clock.now(), room, this.options.instanceId, leaseMs, {
            perEndpoint: concurrencyPerEndpoint,
            perOwner: concurrencyPerUser,
          });
          for (const d of due) {
            this.delivering++;
            const p = this.attempt(d)
              .catch((err: unknown) => this.logger.error({ err: asError(err), deliveryId: d.id }, 'delivery attempt failed'))
              .finally(() => {
                this.delivering--;
                this.inFlight.delete(p);
                this.deliver();
              });
            this.inFlight.add(p);
          }
          if (due.length === room) this.deliverAgain = true;
        } catch (err) {
          this.logger.warn({ err: asError(err) }, 'claiming webhook deliveries failed');
        }
      } while (this.deliverAgain && this.running);
    })().finally(() => {
      this.deliveringLoop = undefined;
    });
  }

  private async attempt(d: Delivery): Promise<void> {
    const started = this.options.clock.now();
    const receiver = await this.receiver(d, started);
    if ('error' in receiver) {
      // A registered endpoint deleted or disabled after this delivery was written: given up without a request.
      await this.hooks.recordAttempt(d.id, this.options.instanceId, { at: started, error: receiver.error, durationMs: 0 }, { state: receiver.state });
      return;
    }
    const timestamp = new Date(started);
    const signatures = receiver.keys.map((key) => new Webhook(key).sign(d.id, timestamp, d.payload));
    // The attempt continues the trace of the generation it is about (stored with the delivery), never the span that
    // happens to be active in the delivery loop; `batch.completed` has none, so each of its attempts is a trace's root.
    const response = await this.telemetry.inSpan('genservice.webhook.deliver', { 'genservice.delivery_id': d.id, 'genservice.attempt': d.attempts + 1 }, () => this.transport({
      url: receiver.url,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'genservice-webhooks/1',
        'webhook-id': d.id,
        'webhook-timestamp': String(Math.floor(started / 1000)),
        'webhook-signature': signatures.join(' '),
      },
      body: d.payload,
      timeoutMs: this.options.webhooks.timeoutMs,
    }), contextOfTraceparent(d.traceparent) ?? ROOT_CONTEXT, SpanKind.CLIENT);
    const finished = this.options.clock.now();
    const attempts = d.attempts + 1;
    const outcome = this.outcome(response, attempts, finished);
    this.telemetry.webhookDelivery(outcome.state === 'pending' ? 'retry' : outcome.state, finished - started);
    const recorded = await this.hooks.recordAttempt(
      d.id,
      this.options.instanceId,
      { at: started, durationMs: finished - started, ...('status' in response ? { status: response.status } : { error: response.error }) },
      outcome,
    );
    if (!recorded) {
      this.logger.warn({ deliveryId: d.id }, 'delivery lease lost before its attempt was recorded; it will be tried again');
      return;
    }
    // Told with the URL the attempt went to (the endpoint's now), not the one its delivery was written for.
    if (d.endpointId !== undefined) await this.health.attempted({ ...d, url: receiver.url }, attemptSucceeded('status' in response ? response.status : undefined), finished);
    if (outcome.state === 'gone') {
      // The URL that answered: a registered endpoint's as it is now, which may not be the one its delivery was written for.
      const stopped = await this.hooks.stopEndpoint(d.ownerId, receiver.url);
      this.logger.info({ url: safeLabel(receiver.url), ownerId: d.ownerId, stopped }, 'receiver answered 410 Gone: endpoint stopped');
    } else if (outcome.state === 'failed') {
      this.logger.warn({ deliveryId: d.id, url: safeLabel(d.url), attempts }, 'webhook delivery given up');
    }
  }

  /**
   * Where an attempt goes and the keys it is signed with: a registered endpoint's URL as it is now (an owner who
   * fixed it gets the retries there) and its secret (and its previous one during a rotation's overlap); else the
   * delivery's URL and its owner's secrets. Why not, for an endpoint that is gone or disabled.
   */
  private async receiver(d: Delivery, now: number): Promise<{ url: string; keys: string[] } | { error: string; state: 'gone' | 'failed' }> {
    if (d.endpointId !== undefined) {
      const e = await this.hooks.getEndpoint(d.endpointId, d.ownerId);
      if (!e) return { error: 'the endpoint was deleted', state: 'gone' };
      if (e.disabledAt !== undefined) return { error: 'the endpoint is disabled', state: 'failed' };
      return { url: e.url, keys: [e.secret, ...(e.previousSecret && e.previousSecret.expiresAt > now ? [e.previousSecret.key] : [])] };
    }
    const secrets = (await this.hooks.getSecrets(d.ownerId, now)) ?? { current: await this.hooks.ensureSecret(d.ownerId, newWebhookSecret(), now) };
    return { url: d.url, keys: [secrets.current, ...(secrets.previous ? [secrets.previous.key] : [])] };
  }

  private outcome(response: WebhookResponse, attempts: number, now: number): DeliveryOutcome {
    if ('status' in response) {
      if (response.status >= 200 && response.status < 300) return { state: 'delivered' };
      if (response.status === 410) return { state: 'gone' };
    }
    const schedule = this.options.webhooks.retrySchedule;
    if (attempts > schedule.length) return { state: 'failed' };
    const asked = 'status' in response && (response.status === 429 || response.status === 503) ? retryAfterMs(response.retryAfter, now) : undefined;
    return { state: 'pending', nextAttemptAt: now + retryDelay(schedule[attempts - 1]!, asked, Math.random()) };
  }
}
