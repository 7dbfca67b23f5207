/**
 * DI symbols of the per-service child container, for what has no class of its own: the ports (a host's object or an
 * in-memory default) and the options. Every class of core is its own token. Internal: users configure through
 * options, never through these.
 */
export const TOKENS = {
  Options: Symbol('genservice.Options'),
  Providers: Symbol('genservice.Providers'),
  Logger: Symbol('genservice.Logger'),
  /** The service's one clock (`options.clock`, or the system clock). */
  Clock: Symbol('genservice.Clock'),
  Store: Symbol('genservice.GenerationStore'),
  Ledger: Symbol('genservice.Ledger'),
  ApiKeys: Symbol('genservice.ApiKeyResolver'),
  /** The host's key store itself (behind the cache when there is one): what `Accounts` manages keys in. */
  KeyStore: Symbol('genservice.ApiKeyStore'),
  AuditLog: Symbol('genservice.AuditLog'),
  Blobs: Symbol('genservice.BlobStore'),
  Queue: Symbol('genservice.JobQueue'),
  Capacity: Symbol('genservice.CapacityStore'),
  Idempotency: Symbol('genservice.IdempotencyStore'),
  Notifier: Symbol('genservice.Notifier'),
  WebhookStore: Symbol('genservice.WebhookStore'),
  UploadStore: Symbol('genservice.UploadStore'),
  WebhookTransport: Symbol('genservice.WebhookTransport'),
  WebhookUrlCheck: Symbol('genservice.WebhookUrlCheck'),
} as const;
