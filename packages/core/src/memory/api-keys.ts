import { systemClock } from '../clock.js';
import { hashApiKey, newKeyId } from '../domain/ids.js';
import type { Clock } from '../ports/clock.js';
import type { ApiKeyInfo, ApiKeyStore, KeyScope, NewApiKey, Principal } from '../ports/api-keys.js';

export { hashApiKey } from '../domain/ids.js';

export interface MemoryApiKeyStoreOptions {
  keys?: Array<{ apiKey: string; userId: string }>;
  /** Where `now` comes from (key expiry, last use). Default: the system clock (a service gives its own). */
  clock?: Clock;
}

/** How often a key's `lastUsedAt` is written at most: a write per request would cost more than the request. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * API keys held as SHA-256 digests in a Map. A lookup by digest reveals nothing about how much of a key matched:
 * the digest of a near-miss shares no prefix with the real one.
 */
export class MemoryApiKeyStore implements ApiKeyStore {
  // Not #private fields on purpose: the contract suite walks reachable state to check no plain key is held.
  private readonly keyByDigest = new Map<string, ApiKeyInfo>();
  private readonly digestById = new Map<string, string>();
  /** Revoked keys, by digest, with their owner; and their ids. A revoke is permanent: neither is ever stored again. */
  private readonly revokedOwner = new Map<string, string>();
  private readonly revokedIds = new Set<string>();

  private readonly clock: Clock;

  constructor(options: MemoryApiKeyStoreOptions = {}) {
    this.clock = options.clock ?? systemClock;
    for (const { apiKey, userId } of options.keys ?? []) this.add(apiKey, userId);
  }

  /** Answers at once (the port allows it); typed as the port is, so a subclass may answer with a promise. */
  resolve(apiKey: string, now: number = this.clock.now()): Principal | null | PromiseLike<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const key = this.keyByDigest.get(hashApiKey(apiKey));
    if (key === undefined) return null;
    if (key.expiresAt !== undefined && key.expiresAt <= now) return null;
    if (key.lastUsedAt === undefined || now - key.lastUsedAt >= LAST_USED_RESOLUTION_MS) key.lastUsedAt = now;
    return principalOf(key);
  }

  async addKey(apiKey: string, userId: string): Promise<void> {
    this.add(apiKey, userId);
  }

  async createKey(apiKey: string, key: NewApiKey): Promise<void> {
    assertKey(apiKey);
    const digest = hashApiKey(apiKey);
    if (this.keyByDigest.has(digest) || this.revokedOwner.has(digest)) throw new Error('This API key is already stored');
    if (this.digestById.has(key.keyId) || this.revokedIds.has(key.keyId)) throw new Error(`Key id ${key.keyId} is already taken`);
    this.keyByDigest.set(digest, copyKey(key));
    this.digestById.set(key.keyId, digest);
  }

  async listKeys(userId: string): Promise<ApiKeyInfo[]> {
    // A Map keeps insertion order: oldest first.
    return [...this.keyByDigest.values()].filter((k) => k.userId === userId).map(copyKey);
  }

  async getKey(keyId: string): Promise<ApiKeyInfo | null> {
    const digest = this.digestById.get(keyId);
    const key = digest === undefined ? undefined : this.keyByDigest.get(digest);
    return key ? copyKey(key) : null;
  }

  async revokeKey(apiKey: string): Promise<void> {
    if (typeof apiKey !== 'string') return;
    this.revoke(hashApiKey(apiKey));
  }

  async revokeKeyById(keyId: string): Promise<boolean> {
    const digest = this.digestById.get(keyId);
    return digest !== undefined && this.revoke(digest);
  }

  /** Forgets the key, keeping its digest and id as revoked, so that no later add brings it back. */
  private revoke(digest: string): boolean {
    const key = this.keyByDigest.get(digest);
    if (!key) return false;
    this.keyByDigest.delete(digest);
    this.digestById.delete(key.keyId);
    this.revokedOwner.set(digest, key.userId);
    this.revokedIds.add(key.keyId);
    return true;
  }

  private add(apiKey: string, userId: string): void {
    assertKey(apiKey);
    const digest = hashApiKey(apiKey);
    // A revoked key stays revoked: adding it again (a host seeding its keys at every start) changes nothing.
    const owner = this.keyByDigest.get(digest)?.userId ?? this.revokedOwner.get(digest);
    if (owner !== undefined) {
      // Re-pointing a key would hand one user's credential to another.
      if (owner !== userId) throw new Error('This API key already belongs to another user');
      return;
    }
    const keyId = newKeyId();
    this.keyByDigest.set(digest, { keyId, userId, name: 'default', scopes: [...ALL_SCOPES], createdAt: this.clock.now() });
    this.digestById.set(keyId, digest);
  }
}

/** Every scope: what a key made by the host's own code (`addKey`) may do. */
export const ALL_SCOPES: readonly KeyScope[] = ['generate', 'read'];

/** The principal a stored key resolves to; every store answers the same shape. */
export function principalOf(key: ApiKeyInfo): Principal {
  const p: Principal = { userId: key.userId, keyId: key.keyId, scopes: key.scopes };
  if (key.models !== undefined) p.models = key.models;
  if (key.budget !== undefined) p.budget = key.budget;
  if (key.maxInFlight !== undefined) p.maxInFlight = key.maxInFlight;
  if (key.expiresAt !== undefined) p.expiresAt = key.expiresAt;
  return p;
}

function copyKey(key: ApiKeyInfo): ApiKeyInfo {
  const out: ApiKeyInfo = { keyId: key.keyId, userId: key.userId, name: key.name, scopes: [...key.scopes], createdAt: key.createdAt };
  if (key.models !== undefined) out.models = [...key.models];
  if (key.budget !== undefined) out.budget = { amount: key.budget.amount, period: key.budget.period };
  if (key.maxInFlight !== undefined) out.maxInFlight = key.maxInFlight;
  if (key.expiresAt !== undefined) out.expiresAt = key.expiresAt;
  if (key.lastUsedAt !== undefined) out.lastUsedAt = key.lastUsedAt;
  return out;
}

function assertKey(apiKey: string): void {
  if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string');
}

