/**
 * What a key may do: `generate` creates and cancels generations, `read` reads them, the models and usage;
 * `priority` asks a create priority the host restricts (`priority.scoped` service option).
 */
export type KeyScope = 'generate' | 'read' | 'priority';

/** A key's spend limit: at most `amount` tokens reserved or charged per UTC day or UTC month. */
export interface KeyBudget {
  amount: number;
  period: 'day' | 'month';
}

/** Who a request acts for, and through which key. */
export interface Principal {
  userId: string;
  /**
   * The managed key the request came with. A host's own resolver may leave the key fields out: such a principal may
   * do everything its user may, with no key budget.
   */
  keyId?: string;
  scopes?: readonly KeyScope[];
  /** Model allow-list: the only models this key lists and creates with. Absent: every model. */
  models?: readonly string[];
  budget?: KeyBudget;
  /** At most this many of the key's generations pending or processing at once. Absent: no cap of its own. */
  maxInFlight?: number;
  /** Epoch ms from which the key resolves to null: a cache of resolved keys trusts it no longer than this. */
  expiresAt?: number;
}

/** A key as its owner and the host see it: never the secret, nor its digest. */
export interface ApiKeyInfo {
  keyId: string;
  userId: string;
  name: string;
  scopes: KeyScope[];
  models?: string[];
  budget?: KeyBudget;
  /** At most this many of the key's generations pending or processing at once. */
  maxInFlight?: number;
  /** Epoch ms after which the key resolves to null. */
  expiresAt?: number;
  createdAt: number;
  /** Epoch ms of a recent use, recorded at most about once a minute per key. */
  lastUsedAt?: number;
}

/** A key to store; core validates it (scopes, budget, expiry) before a store sees it. */
export type NewApiKey = Omit<ApiKeyInfo, 'lastUsedAt'>;

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

/**
 * An ApiKeyResolver whose keys are objects that can be managed (the stores ship one).
 *
 * Guarantees, beyond the resolver's (the contract suite checks each):
 * - `resolve(apiKey, now)` answers the key's principal with its id, scopes, allow-list and budget; an expired key
 *   (`expiresAt <= now`) resolves to null, as a revoked one does.
 * - `createKey` stores the digest and the key's fields in one write; it throws, storing nothing, when the key id or
 *   the key itself is already stored (for any user).
 * - `listKeys` never returns a secret or a digest; revoked keys are gone from it.
 * - `revokeKeyById` answers whether a key was revoked; on every instance the key's next `resolve` is null.
 * - A revoke is permanent: the store remembers the revoked key's digest and id (durably, for a durable store), so
 *   `addKey` of it changes nothing (it still resolves to null; a host that seeds its keys at every start never brings
 *   back a key an operator revoked), and `createKey` of its secret or its id throws.
 */
export interface ApiKeyStore extends ApiKeyResolver {
  resolve(apiKey: string, now?: number): Principal | null | PromiseLike<Principal | null>;
  /**
   * Adds a key for a user with every scope and no limits (a key made by the host's own code). Adding the same key
   * again for the same user is a no-op, and so is adding a key that was revoked: it stays revoked. Throws when the key
   * is (or was) another user's.
   */
  addKey(apiKey: string, userId: string): Promise<void>;
  /** Stores a managed key under its digest; throws when the key or its id is already stored. */
  createKey(apiKey: string, key: NewApiKey): Promise<void>;
  /** A user's keys, oldest first. */
  listKeys(userId: string): Promise<ApiKeyInfo[]>;
  /** One key by id, or null. */
  getKey(keyId: string): Promise<ApiKeyInfo | null>;
  /** Revokes a key for good; the next `resolve` of it returns null. Revoking an unknown key is a no-op. */
  revokeKey(apiKey: string): Promise<void>;
  /** Revokes a key by its id; true when there was one to revoke. */
  revokeKeyById(keyId: string): Promise<boolean>;
}
