import { LRUCache } from 'lru-cache';
import { hashApiKey } from '../domain/ids.js';
import type { ApiKeyResolver, Principal } from '../ports/api-keys.js';
import { systemClock } from '../clock.js';
import type { Clock } from '../ports/clock.js';

export interface ApiKeyCacheOptions {
  /**
   * How long a resolved key is trusted without asking the resolver again. A revoked key keeps working on this
   * instance for up to this long, so the cache is off unless you set it.
   */
  ttlMs: number;
  /** Most keys kept. Default 10 000. */
  max?: number;
}

/**
 * Caches successful key resolutions (never failures, so a key added a moment ago works at once), keyed by the
 * key's digest so no plain key is held in memory longer than the request.
 *
 * The `apiKeyCache` option builds one in front of `apiKeys`. To call `forget` beside your own revoke, build it
 * yourself instead and pass it as `apiKeys`.
 */
export class CachedApiKeyResolver implements ApiKeyResolver {
  private readonly cache: LRUCache<string, Principal>;
  private readonly ttlMs: number;
  /** Bumped by each forget: a lookup that was under way across one is not cached (it may predate a revoke). */
  private forgets = 0;

  constructor(
    private readonly inner: ApiKeyResolver,
    options: ApiKeyCacheOptions,
    /** Where the TTL's time comes from (the service gives its own clock). Default: the system clock. */
    private readonly clock: Clock = systemClock,
  ) {
    this.ttlMs = options.ttlMs;
    // The TTL reads the clock at each lookup (ttlResolution 0), not performance.now() cached for a millisecond.
    this.cache = new LRUCache<string, Principal>({ max: options.max ?? 10_000, ttl: options.ttlMs, ttlResolution: 0, perf: { now: () => clock.now() } });
  }

  async resolve(apiKey: string): Promise<Principal | null> {
    const digest = hashApiKey(apiKey);
    const hit = this.cache.get(digest);
    if (hit) return hit;
    const forgets = this.forgets;
    const found = await this.inner.resolve(apiKey);
    if (!found || forgets !== this.forgets) return found;
    if (found.expiresAt === undefined) {
      this.cache.set(digest, found);
      return found;
    }
    // Never past the key's own expiry: from then on the store answers null, and so must this instance. (An entry is
    // trusted while at most `ttl` old, so the last trusted instant is `expiresAt - 1`; a ttl of 0 would mean forever.)
    const ttl = Math.min(this.ttlMs, found.expiresAt - this.clock.now() - 1);
    if (ttl >= 1) this.cache.set(digest, found, { ttl });
    return found;
  }

  /** Forgets one key at once (call it beside your own revoke when revocation must not wait for the TTL). */
  forget(apiKey: string): void {
    this.forgets++;
    this.cache.delete(hashApiKey(apiKey));
  }

  /** Forgets a managed key by its id (what `service.accounts.revokeKey` calls on this instance). */
  forgetKeyId(keyId: string): void {
    this.forgets++;
    for (const [digest, principal] of this.cache.entries()) {
      if (principal.keyId === keyId) this.cache.delete(digest);
    }
  }
}
