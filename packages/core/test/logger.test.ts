// Errors reach the host's logger as Error objects under `err`, so pino's standard serializer applies (type, message,
// stack), and the built-in JSON logger writes them the same way instead of `{}`.
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createGenerationService, createJsonLogger, MemoryApiKeyStore, MemoryLedger, type Logger, type ModelProvider } from '@genservice/core';
import { until } from '@genservice/testing';

const provider: ModelProvider = {
  models: [{ modelId: 'boom', title: 'Boom', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
  generate: async () => {
    throw new TypeError('the model exploded');
  },
};

async function failOnce(logger: Logger): Promise<void> {
  const service = createGenerationService({
    providers: [provider],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10 } }),
    logger,
  });
  await service.start();
  try {
    const { generationId } = await service.create('u', { modelId: 'boom' });
    await until(() => service.get('u', generationId), { accept: (g) => g.status === 'failed' });
    expect((await service.get('u', generationId)).status).toBe('failed');
  } finally {
    await service.stop();
  }
}

function lines(): { stream: Writable; read(): Array<Record<string, any>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, read: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

describe('errors handed to the logger', () => {
  it('are Error objects under err, which pino serializes with type, message and stack', async () => {
    const out = lines();
    await failOnce(pino({ level: 'debug' }, out.stream) as unknown as Logger);
    const entry = out.read().find((l) => l.msg === 'provider threw an unexpected error');
    expect(entry?.err).toMatchObject({ type: 'TypeError', message: 'the model exploded', stack: expect.stringContaining('TypeError: the model exploded') });
  });

  it('are written by the JSON logger the same way, not as {}', async () => {
    const written: string[] = [];
    await failOnce(createJsonLogger({ level: 'debug', write: (l) => written.push(l) }));
    const entry = written.map((l) => JSON.parse(l)).find((l) => l.msg === 'provider threw an unexpected error');
    expect(entry?.err).toMatchObject({ type: 'TypeError', message: 'the model exploded', stack: expect.stringContaining('the model exploded') });
    const plain: string[] = [];
    createJsonLogger({ write: (l) => plain.push(l) }).error({ err: Object.assign(new Error('db down', { cause: 'socket' }), { code: 'ECONNREFUSED' }) }, 'x');
    expect(JSON.parse(plain[0]!).err).toMatchObject({ type: 'Error', message: 'db down', code: 'ECONNREFUSED', cause: 'socket' });
  });
});
