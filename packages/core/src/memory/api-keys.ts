import { hash } from 'node:crypto';
import type { ApiKeyStore, Principal } from '../ports/api-keys.js';

/** Hex SHA-256 of an API key: the only form in which any store keeps a key. */
export function hashApiKey(apiKey: string): string {
  // One-shot hash (Node >= 20.12): no Hash object for a digest taken on every request.
  return hash('sha256', apiKey, 'hex');
}

export interface MemoryApiKeyStoreOptions {
  keys?: Array<{ apiKey: string; userId: string }>;
}

/**
 * API keys held as SHA-256 digests in a Map. A lookup by digest reveals nothing about how much of a key matched:
 * the digest of a near-miss shares no prefix with the real one.
 */
export class MemoryApiKeyStore implements ApiKeyStore {
  // Not a #private field on purpose: the contract suite walks reachable state to check no plain key is held.
  private readonly userByDigest = new Map<string, string>();

  constructor(options: MemoryApiKeyStoreOptions = {}) {
    for (const { apiKey, userId } of options.keys ?? []) this.add(apiKey, userId);
  }

  /** Answers at once (the port allows it); typed as the port is, so a subclass may answer with a promise. */
  resolve(apiKey: string): Principal | null | PromiseLike<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const userId = this.userByDigest.get(hashApiKey(apiKey));
    return userId === undefined ? null : { userId };
  }

  async addKey(apiKey: string, userId: string): Promise<void> {
    this.add(apiKey, userId);
  }

  async revokeKey(apiKey: string): Promise<void> {
    this.userByDigest.delete(hashApiKey(apiKey));
  }

  private add(apiKey: string, userId: string): void {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string');
    const digest = hashApiKey(apiKey);
    const owner = this.userByDigest.get(digest);
    if (owner !== undefined && owner !== userId) {
      // Re-pointing a key would hand one user's credential to another.
      throw new Error('This API key already belongs to another user');
    }
    this.userByDigest.set(digest, userId);
  }
}
