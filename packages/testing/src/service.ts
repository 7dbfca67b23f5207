/**
 * The one way tests make a service: in-memory ports, a scripted test provider and fast retries, filled in around
 * whatever the test sets itself.
 *
 * @example
 * ```ts
 * import { createTestService, until } from '@genservice/testing';
 *
 * const t = await createTestService({ balances: { alice: 100 } });
 * try {
 *   const { generationId } = await t.service.create('alice', { modelId: 'fake-held' });
 *   await t.provider.gate.reached(1); // the provider is running
 *   t.provider.gate.release();
 *   await until(() => t.service.get('alice', generationId), { accept: (g) => g.status === 'completed' });
 * } finally {
 *   await t.stop();
 * }
 * ```
 */
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
  type GenerationServiceOptions,
} from '@genservice/core';
import type { GenerationStore } from '@genservice/core/ports';
import { createFakeProvider, type Gate, type ScriptedProvider } from './fakes.js';

export interface TestServiceOptions extends Partial<GenerationServiceOptions> {
  /**
   * The providers. Default: one `createFakeProvider()` (models `fake-text`, `fake-noop`, `fake-fail`, `fake-flaky`,
   * `fake-held`, `fake-image`), answered as `provider`.
   */
  providers?: GenerationServiceOptions['providers'];
  /** Tokens credited to these users on the default `MemoryLedger`. Ignored when `ledger` is given. */
  balances?: Record<string, number>;
  /** API keys (key to user id) on the default `MemoryApiKeyStore`. Ignored when `apiKeys` is given. */
  keys?: Record<string, string>;
  /** Call `service.start()` (runner and recovery) before answering. Default true. */
  start?: boolean;
}

export interface TestService {
  service: GenerationService;
  /** The default fake provider (with its `gate` for the `fake-held` model); undefined when `providers` was given. */
  provider: (ScriptedProvider & { gate: Gate }) | undefined;
  /** The store the service uses: the one given, or the default `MemoryGenerationStore`. */
  store: GenerationStore;
  /** The default `MemoryLedger`; undefined when `ledger` was given (the test holds its own). */
  ledger: MemoryLedger | undefined;
  /** The default `MemoryApiKeyStore`; undefined when `apiKeys` was given. */
  apiKeys: MemoryApiKeyStore | undefined;
  /**
   * Lets every held run of the default provider through and stops the service (running jobs get 2 s, then their
   * signal). Safe to call twice.
   */
  stop(): Promise<void>;
}

/**
 * Makes a service for a test. Defaults, each replaced by the option of the same name: in-memory store, ledger and
 * API keys; the fake provider; `runner` retries after 5-20 ms instead of seconds; `recovery` with no periodic pass
 * (`intervalMs: 0`). `runner` and `recovery` are merged field by field with those defaults. Any other
 * `createGenerationService` option passes through as given.
 */
export async function createTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const { balances, keys, start = true, providers, runner, recovery, ...rest } = options;
  const provider = providers ? undefined : createFakeProvider();
  const store = rest.store ?? new MemoryGenerationStore();
  const ledger = rest.ledger ? undefined : new MemoryLedger({ balances });
  const apiKeys = rest.apiKeys ? undefined : new MemoryApiKeyStore({ keys: Object.entries(keys ?? {}).map(([apiKey, userId]) => ({ apiKey, userId })) });
  const service = createGenerationService({
    ...rest,
    providers: providers ?? [provider!],
    store,
    ledger: rest.ledger ?? ledger!,
    apiKeys: rest.apiKeys ?? apiKeys!,
    runner: { retryBaseDelayMs: 5, retryMaxDelayMs: 20, ...runner },
    recovery: { intervalMs: 0, ...recovery },
  });
  if (start) await service.start();
  let stopping: Promise<void> | undefined;
  return {
    service,
    provider,
    store,
    ledger,
    apiKeys,
    stop() {
      provider?.gate.open();
      stopping ??= service.stop({ timeoutMs: 2000 });
      return stopping;
    },
  };
}
