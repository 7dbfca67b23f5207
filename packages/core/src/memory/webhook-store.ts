import type {
  ClaimFairness,
  Delivery,
  DeliveryAttempt,
  DeliveryOutcome,
  DeliveryWithAttempts,
  NewDelivery,
  WebhookEndpointChange,
  WebhookEndpointRecord,
  WebhookSecrets,
  WebhookStore,
} from '../ports/webhooks.js';

interface StoredSecrets {
  current: string;
  previous?: { key: string; expiresAt: number };
}

interface StoredDelivery extends Delivery {
  history: DeliveryAttempt[];
  order: number;
}

function copyDelivery(d: StoredDelivery): Delivery {
  const { history: _h, order: _o, ...rest } = d;
  return { ...rest };
}

/**
 * WebhookStore in Maps, for tests and single-process hosts. Every method checks and writes in one synchronous step,
 * so of racing callers in one process exactly one wins (the same guarantee SQL stores get from conditional updates).
 */
export class MemoryWebhookStore implements WebhookStore {
  private readonly secrets = new Map<string, StoredSecrets>();
  private readonly deliveries = new Map<string, StoredDelivery>();
  private readonly byGeneration = new Map<string, Set<string>>();
  private readonly cursors = new Map<string, string>();
  private readonly endpoints = new Map<string, WebhookEndpointRecord & { order: number }>();
  private sequence = 0;

  async getSecrets(userId: string, now: number): Promise<WebhookSecrets | null> {
    const s = this.secrets.get(userId);
    if (!s) return null;
    return s.previous && s.previous.expiresAt > now ? { current: s.current, previous: { ...s.previous } } : { current: s.current };
  }

  async ensureSecret(userId: string, candidate: string, _now: number): Promise<string> {
    const s = this.secrets.get(userId);
    if (s) return s.current;
    this.secrets.set(userId, { current: candidate });
    return candidate;
  }

  async rotateSecret(userId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookSecrets> {
    const s = this.secrets.get(userId);
    const next: StoredSecrets = s ? { current: newKey, previous: { key: s.current, expiresAt: now + overlapMs } } : { current: newKey };
    this.secrets.set(userId, next);
    return (await this.getSecrets(userId, now))!;
  }

  async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    for (const d of deliveries) {
      if (this.deliveries.has(d.id)) continue;
      this.deliveries.set(d.id, { ...d, state: 'pending', attempts: 0, history: [], order: this.sequence++ });
      let ids = this.byGeneration.get(d.generationId);
      if (!ids) {
        ids = new Set();
        this.byGeneration.set(d.generationId, ids);
      }
      ids.add(d.id);
    }
  }

  async claimDue(now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness): Promise<Delivery[]> {
    if (!(limit > 0)) return [];
    const leased = (d: StoredDelivery): boolean => d.leaseExpiresAt !== undefined && d.leaseExpiresAt > now;
    let due = [...this.deliveries.values()]
      .filter((d) => d.state === 'pending' && d.nextAttemptAt <= now && !leased(d))
      .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.order - b.order);
    if (fairness) {
      const endpoint = (d: Delivery): string => JSON.stringify([d.ownerId, d.url]);
      const busyEndpoint = new Map<string, number>();
      const busyOwner = new Map<string, number>();
      for (const d of this.deliveries.values()) {
        if (d.state !== 'pending' || !leased(d)) continue;
        busyEndpoint.set(endpoint(d), (busyEndpoint.get(endpoint(d)) ?? 0) + 1);
        busyOwner.set(d.ownerId, (busyOwner.get(d.ownerId) ?? 0) + 1);
      }
      // Within the caps, each owner's deliveries in order; then owners take turns by that order (round-robin).
      const turn = new Map<StoredDelivery, number>();
      for (const d of due) {
        const e = endpoint(d);
        const ne = busyEndpoint.get(e) ?? 0;
        const no = busyOwner.get(d.ownerId) ?? 0;
        if (ne >= fairness.perEndpoint || no >= fairness.perOwner) continue;
        busyEndpoint.set(e, ne + 1);
        busyOwner.set(d.ownerId, no + 1);
        turn.set(d, no);
      }
      due = due.filter((d) => turn.has(d)).sort((a, b) => turn.get(a)! - turn.get(b)! || a.nextAttemptAt - b.nextAttemptAt || a.order - b.order);
    }
    due = due.slice(0, Math.floor(limit));
    for (const d of due) {
      d.leaseOwner = workerId;
      d.leaseExpiresAt = now + leaseMs;
    }
    return due.map(copyDelivery);
  }

  async recordAttempt(id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean> {
    const d = this.deliveries.get(id);
    if (!d || d.state !== 'pending' || d.leaseOwner !== workerId || d.leaseExpiresAt === undefined || d.leaseExpiresAt <= attempt.at) return false;
    d.history.push({ ...attempt });
    d.attempts += 1;
    d.state = outcome.state;
    if (outcome.state === 'pending' && outcome.nextAttemptAt !== undefined) d.nextAttemptAt = outcome.nextAttemptAt;
    delete d.leaseOwner;
    delete d.leaseExpiresAt;
    return true;
  }

  async stopEndpoint(ownerId: string, url: string): Promise<number> {
    let n = 0;
    for (const d of this.deliveries.values()) {
      if (d.state === 'pending' && d.ownerId === ownerId && d.url === url) {
        d.state = 'gone';
        n++;
      }
    }
    return n;
  }

  async deliveriesOf(generationId: string): Promise<DeliveryWithAttempts[]> {
    const ids = this.byGeneration.get(generationId);
    if (!ids) return [];
    return [...ids]
      .map((id) => this.deliveries.get(id)!)
      .sort((a, b) => a.seq - b.seq || a.order - b.order)
      .map((d) => ({ ...copyDelivery(d), history: d.history.map((h) => ({ ...h })) }));
  }

  async getCursor(name: string): Promise<string> {
    return this.cursors.get(name) ?? '';
  }

  async advanceCursor(name: string, from: string, to: string): Promise<boolean> {
    if ((this.cursors.get(name) ?? '') !== from) return false;
    this.cursors.set(name, to);
    return true;
  }

  async deleteForGenerations(generationIds: string[]): Promise<number> {
    let n = 0;
    for (const g of generationIds) {
      const ids = this.byGeneration.get(g);
      if (!ids) continue;
      for (const id of ids) if (this.deliveries.delete(id)) n++;
      this.byGeneration.delete(g);
    }
    return n;
  }

  async createEndpoint(endpoint: WebhookEndpointRecord): Promise<void> {
    if (this.endpoints.has(endpoint.id)) throw new Error(`webhook endpoint ${endpoint.id} exists`);
    this.endpoints.set(endpoint.id, { ...structuredClone(endpoint), order: this.sequence++ });
  }

  private owned(id: string, ownerId: string): (WebhookEndpointRecord & { order: number }) | undefined {
    const e = this.endpoints.get(id);
    return e && e.ownerId === ownerId ? e : undefined;
  }

  async getEndpoint(id: string, ownerId: string): Promise<WebhookEndpointRecord | null> {
    const e = this.owned(id, ownerId);
    return e ? copyEndpoint(e) : null;
  }

  async listEndpoints(ownerId: string): Promise<WebhookEndpointRecord[]> {
    return [...this.endpoints.values()]
      .filter((e) => e.ownerId === ownerId)
      .sort((a, b) => a.createdAt - b.createdAt || a.order - b.order)
      .map(copyEndpoint);
  }

  async updateEndpoint(id: string, ownerId: string, change: WebhookEndpointChange): Promise<WebhookEndpointRecord | null> {
    const e = this.owned(id, ownerId);
    if (!e) return null;
    if (change.url !== undefined) e.url = change.url;
    if (change.events !== undefined) e.events = [...change.events];
    if (change.description === null) delete e.description;
    else if (change.description !== undefined) e.description = change.description;
    if (change.disabledAt === null) {
      delete e.disabledAt;
      delete e.failingSince;
    } else if (change.disabledAt !== undefined && e.disabledAt === undefined) {
      e.disabledAt = change.disabledAt;
      this.endDeliveries(id, 'failed');
    }
    e.updatedAt = change.updatedAt;
    return copyEndpoint(e);
  }

  async deleteEndpoint(id: string, ownerId: string): Promise<boolean> {
    if (!this.owned(id, ownerId)) return false;
    this.endpoints.delete(id);
    this.endDeliveries(id, 'gone');
    return true;
  }

  private endDeliveries(endpointId: string, state: 'gone' | 'failed'): void {
    for (const d of this.deliveries.values()) if (d.endpointId === endpointId && d.state === 'pending') d.state = state;
  }

  async rotateEndpointSecret(id: string, ownerId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookEndpointRecord | null> {
    const e = this.owned(id, ownerId);
    if (!e) return null;
    e.previousSecret = { key: e.secret, expiresAt: now + overlapMs };
    e.secret = newKey;
    e.updatedAt = now;
    return copyEndpoint(e);
  }

  async noteEndpointAttempt(id: string, ok: boolean, at: number): Promise<number | null> {
    const e = this.endpoints.get(id);
    if (!e || e.disabledAt !== undefined) return null;
    if (ok) delete e.failingSince;
    else e.failingSince ??= at;
    return e.failingSince ?? null;
  }

  async disableEndpoint(id: string, at: number): Promise<boolean> {
    const e = this.endpoints.get(id);
    if (!e || e.disabledAt !== undefined) return false;
    e.disabledAt = at;
    e.updatedAt = at;
    this.endDeliveries(id, 'failed');
    return true;
  }

  async endpointDeliveries(endpointId: string, ownerId: string, limit: number): Promise<DeliveryWithAttempts[]> {
    return [...this.deliveries.values()]
      .filter((d) => d.endpointId === endpointId && d.ownerId === ownerId)
      .sort((a, b) => b.createdAt - a.createdAt || b.order - a.order)
      .slice(0, Math.max(0, Math.floor(limit)))
      .map((d) => ({ ...copyDelivery(d), history: d.history.map((h) => ({ ...h })) }));
  }

  async replayDelivery(id: string, endpointId: string, now: number): Promise<Delivery | 'busy' | null> {
    const d = this.deliveries.get(id);
    if (!d || d.endpointId !== endpointId) return null;
    if (d.leaseExpiresAt !== undefined && d.leaseExpiresAt > now) return 'busy';
    d.state = 'pending';
    d.nextAttemptAt = now;
    delete d.leaseOwner;
    delete d.leaseExpiresAt;
    return copyDelivery(d);
  }
}

function copyEndpoint(e: WebhookEndpointRecord & { order?: number }): WebhookEndpointRecord {
  const { order: _o, ...rest } = e;
  return structuredClone(rest);
}
