/** DI tokens of the per-service child container. Internal: users configure through options, never through these. */
export const TOKENS = {
  Options: Symbol('genservice.Options'),
  Store: Symbol('genservice.GenerationStore'),
  Ledger: Symbol('genservice.Ledger'),
  ApiKeys: Symbol('genservice.ApiKeyResolver'),
  Blobs: Symbol('genservice.BlobStore'),
  Queue: Symbol('genservice.JobQueue'),
  Idempotency: Symbol('genservice.IdempotencyStore'),
  Logger: Symbol('genservice.Logger'),
  Registry: Symbol('genservice.ModelRegistry'),
  Signer: Symbol('genservice.FileUrlSigner'),
  Executor: Symbol('genservice.Executor'),
  Service: Symbol('genservice.GenerationService'),
  Limits: Symbol('genservice.Limits'),
  InstanceId: Symbol('genservice.InstanceId'),
} as const;
