import { inject, injectable } from 'tsyringe';
import { failedTooLong } from '../domain/webhook-endpoints.js';
import { childLogger } from '../logger.js';
import type { AuditLog } from '../ports/audit.js';
import type { Logger } from '../ports/logger.js';
import type { Delivery, WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { safeLabel } from '../outbound/guard.js';
import { outboxEntries } from './webhook-messages.js';

/** The audit log's actor for what the service does on its own. */
export const SERVICE_ACTOR = 'genservice';

/**
 * The health of registered endpoints, told after each attempt at one of their deliveries: a success ends a failure
 * streak; a failure starts one, and an endpoint whose streak has lasted `webhooks.disableEndpointAfterMs` is disabled
 * (its pending deliveries given up), with a `webhook_endpoint.disabled` message to its owner's other endpoints that
 * take it and a line in the audit log. Only the instance whose disable wins writes both.
 */
@injectable()
export class EndpointHealth {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(TOKENS.AuditLog) private readonly audit: AuditLog,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'webhooks' });
  }

  /** After an attempt at `d` (a registered endpoint's): true when it disabled the endpoint (new deliveries were written). */
  async attempted(d: Delivery, ok: boolean, at: number): Promise<boolean> {
    if (d.endpointId === undefined) return false;
    const failingSince = await this.hooks.noteEndpointAttempt(d.endpointId, ok, at);
    if (failingSince === null || !failedTooLong(failingSince, at, this.options.webhooks.disableEndpointAfterMs)) return false;
    if (!(await this.hooks.disableEndpoint(d.endpointId, at))) return false;
    const endpoint = { endpointId: d.endpointId, url: d.url, failingSince: new Date(failingSince).toISOString() };
    this.logger.warn({ ...endpoint, url: safeLabel(endpoint.url), ownerId: d.ownerId }, 'webhook endpoint failed every attempt for too long: disabled');
    await this.audit.append({ at, actor: SERVICE_ACTOR, action: 'webhook_endpoint.disable', userId: d.ownerId, details: endpoint });
    const others = (await this.hooks.listEndpoints(d.ownerId)).filter(
      (e) => e.id !== d.endpointId && e.disabledAt === undefined && e.events.includes('webhook_endpoint.disabled'),
    );
    if (others.length === 0) return true;
    const type = 'webhook_endpoint.disabled';
    const data = { ...endpoint, disabledAt: new Date(at).toISOString(), reason: 'failing' };
    const payload = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data });
    // Keyed by the disabling's time: an endpoint enabled again and disabled later is a new message.
    await this.hooks.addDeliveries(
      outboxEntries({ subject: d.endpointId, idSeq: at, seq: 1, ownerId: d.ownerId, type, payload, at }, others.map((e) => ({ url: e.url, endpointId: e.id }))),
    );
    return true;
  }
}
