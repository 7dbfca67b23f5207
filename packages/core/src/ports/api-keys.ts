/** Who a request acts for. */
export interface Principal {
  userId: string;
}

/**
 * Turns an API key into its user.
 *
 * Guarantees an implementation must give:
 * - Keys are never held in plain text: only their SHA-256 digests (see `hashApiKey`).
 * - The comparison does not let response time reveal how much of a key matched (lookup by digest, or a
 *   constant-time compare of digests).
 * - A revoked key resolves to `null` on its very next use (no cache that outlives a revoke).
 * - Returns `null` for an unknown key; throws (or rejects) only when the backing service fails.
 *
 * May answer at once (a value) or later (a promise, or any thenable): core awaits only what is a thenable, so a
 * resolver that holds its keys in memory costs a request no turn of the event loop.
 */
export interface ApiKeyResolver {
  resolve(apiKey: string): Principal | null | PromiseLike<Principal | null>;
}

/** An ApiKeyResolver whose keys can be managed (the stores ship one). */
export interface ApiKeyStore extends ApiKeyResolver {
  /** Adds a key for a user. Adding the same key again for the same user is a no-op. */
  addKey(apiKey: string, userId: string): Promise<void>;
  /** Revokes a key; the next `resolve` of it returns null. Revoking an unknown key is a no-op. */
  revokeKey(apiKey: string): Promise<void>;
}
