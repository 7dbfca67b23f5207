import { describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';

const provider = {
  models: [{ modelId: 'm', title: 'M', resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 }],
  generate: async () => ({ text: 'ok' }),
};

describe('the playground route', () => {
  it('is a JSON 404 unless the service is created with playground: true', async () => {
    const service = createGenerationService({ providers: [provider] });
    for (const path of ['/playground', '/playground/', '/playground/app.js']) {
      const r = await service.handle({ method: 'GET', path, headers: {} });
      expect(r.status, path).toBe(404);
      expect(JSON.parse(String(r.body)).error.code).toBe('not_found');
    }
  });

  it('answers a JSON 404, never a 500, when the installed playground package serves no page', async () => {
    // The workspace's @genservice/playground is still a placeholder without readPlaygroundAsset (issue 14): when
    // the package serves its page, this case needs a stand-in module instead.
    const service = createGenerationService({ providers: [provider], playground: true });
    const r = await service.handle({ method: 'GET', path: '/playground', headers: {} });
    expect(r.status).toBe(404);
    expect(JSON.parse(String(r.body)).error.code).toBe('not_found');
  });

  it('rejects a non-boolean playground option', () => {
    expect(() => createGenerationService({ providers: [provider], playground: 'yes' as never })).toThrow(/playground/);
  });
});
