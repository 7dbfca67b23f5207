import { CAPACITY_WINDOW_MS, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '../ports/capacity.js';

interface LaneState {
  /** permitId -> when its slot expires. */
  permits: Map<string, number>;
  /** Requests granted, oldest first. */
  requests: Array<{ at: number; units: number; permitId: string }>;
  pausedUntil: number;
}

/**
 * Provider lanes' counters in this process (the default): exact for one instance; instances that share an upstream
 * account share a store's or Redis's counters instead (`createSqliteStores().capacity`, `PostgresCapacityStore`,
 * `RedisCapacityStore`).
 */
export class MemoryCapacityStore implements CapacityStore {
  private readonly lanes = new Map<string, LaneState>();

  private lane(name: string): LaneState {
    let s = this.lanes.get(name);
    if (!s) {
      s = { permits: new Map(), requests: [], pausedUntil: 0 };
      this.lanes.set(name, s);
    }
    return s;
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const s = this.lane(lane);
    const { now } = ask;
    if (s.pausedUntil > now) return { granted: false, retryAfterMs: s.pausedUntil - now };
    for (const [id, until] of s.permits) if (until <= now) s.permits.delete(id);
    if (limits.concurrency !== undefined && !s.permits.has(ask.permitId) && s.permits.size >= limits.concurrency) return { granted: false };
    while (s.requests.length > 0 && now - s.requests[0]!.at >= CAPACITY_WINDOW_MS) s.requests.shift();
    const oldest = s.requests[0];
    const wait = oldest ? oldest.at + CAPACITY_WINDOW_MS - now : 0;
    if (limits.requestsPerMinute !== undefined && s.requests.length >= limits.requestsPerMinute) return { granted: false, retryAfterMs: wait };
    if (limits.unitsPerMinute !== undefined) {
      const used = s.requests.reduce((sum, r) => sum + r.units, 0);
      if (used > 0 && used + ask.units > limits.unitsPerMinute) return { granted: false, retryAfterMs: wait };
    }
    s.permits.set(ask.permitId, now + ask.holdMs);
    s.requests.push({ at: now, units: ask.units, permitId: ask.permitId });
    return { granted: true };
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    const s = this.lanes.get(lane);
    if (!s) return;
    s.permits.delete(permitId);
    if (refund) {
      const i = s.requests.findIndex((r) => r.permitId === permitId && r.at === refund.at);
      if (i >= 0) s.requests.splice(i, 1);
    }
  }

  async pause(lane: string, until: number): Promise<void> {
    const s = this.lane(lane);
    s.pausedUntil = Math.max(s.pausedUntil, until);
  }
}
