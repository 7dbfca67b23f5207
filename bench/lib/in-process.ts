import type * as Core from '@genservice/core';
import { API_KEY, BALANCE, RUNNER_CONCURRENCY, USER_ID, VALID_BODY, noopProvider } from './fixture.js';

/**
 * The service the in-process scripts (create-profile.ts, instructions.ts) measure: every port in memory, the no-op
 * provider, the runner on, no periodic recovery, and one user whose balance never runs out; `core` is the module to
 * build it from (instructions.ts loads a given build's dist). No budgets, batches, webhooks, expiry or telemetry: a
 * create should do no work for them. Also the POST both drive.
 */
export async function inProcessService(core: Pick<typeof Core, 'createGenerationService' | 'MemoryApiKeyStore' | 'MemoryLedger'>, body: string | Buffer = VALID_BODY) {
  const ledger = new core.MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  const service = core.createGenerationService({
    providers: [noopProvider],
    // Far more than the default in-flight cap for the one user.
    limits: { inFlightPerUser: 10_000_000 },
    apiKeys: new core.MemoryApiKeyStore({ keys: [{ apiKey: API_KEY, userId: USER_ID }] }),
    ledger,
    runner: { concurrency: RUNNER_CONCURRENCY },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  const post = { method: 'POST', path: '/v1/generations', headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' }, body };
  return { service, ledger, post };
}
