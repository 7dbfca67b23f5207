import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, InvalidOptionsError, MemoryApiKeyStore, MemoryBlobStore, MemoryLedger, MemoryUploadStore, type GenerationService, type GenerationServiceOptions, type HttpResponse } from '@genservice/core';
import { isApiPath } from '@genservice/core/adapter';
import { createGate, createScriptedProvider, failingScript, fakeModel, FakeClock, fileScript, PNG_BYTES } from '@genservice/testing';
import { boundaryOf, MAX_PARTS, MultipartError, parseMultipart } from '../src/http/multipart.js';
import { settingsOf } from '../src/openai/mapping.js';

/** Issue 39: the OpenAI-compatible surface as `service.handle` answers it (the SDK tests run it on a real server). */

const image = fakeModel({
  modelId: 'img',
  title: 'Image',
  resultType: 'image',
  price: 3,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'size', title: 'Size', fieldType: 'select', options: ['64x64', '128x128'] },
    { name: 'refs', title: 'References', fieldType: 'image' },
  ],
});
const held = fakeModel({ modelId: 'held', title: 'Held', resultType: 'image', price: 2, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }] });
const broken = fakeModel({ modelId: 'broken', title: 'Fails', resultType: 'image', price: 4, failureFee: 1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }] });

const running: GenerationService[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
});

function build(extra: Partial<GenerationServiceOptions> = {}) {
  const gate = createGate(fileScript(PNG_BYTES, 'image/png'));
  const provider = createScriptedProvider({
    models: [image, held, broken],
    scripts: { img: fileScript(PNG_BYTES, 'image/png'), held: gate.script, broken: failingScript('no luck') },
  });
  const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] });
  const ledger = new MemoryLedger({ balances: { u: 100 } });
  const service = createGenerationService({ providers: [provider], apiKeys: keys, ledger, publicUrl: 'https://api.example.com/gen', openai: { enabled: true }, ...extra });
  running.push(service);
  const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResponse> =>
    service.handle({
      method,
      path,
      headers: { authorization: 'Bearer k', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  return { service, gate, ledger, keys, call };
}

const parse = (res: HttpResponse) => JSON.parse(String(res.body));

/** The OpenAI error object of an answer, checked to hold exactly OpenAI's four fields. */
function openAiError(res: HttpResponse): { message: string; type: string; param: string | null; code: string | null } {
  const body = parse(res);
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  return body.error;
}

async function collect(body: HttpResponse['body']): Promise<string> {
  let out = '';
  for await (const chunk of body as AsyncIterable<string>) out += chunk;
  return out;
}

describe('the OpenAI-compatible surface, off', () => {
  it('answers its paths exactly as paths that are no route, and adapters leave them to the host', async () => {
    const { service, call } = build({ openai: undefined });
    expect(service.servesOpenAi).toBe(false);
    expect(isApiPath('/openai/v1/models', service)).toBe(false);
    const none = await call('GET', '/v1/nope');
    for (const [method, path] of [
      ['GET', '/openai/v1/models'],
      ['POST', '/openai/v1/images/generations'],
      ['PUT', '/openai/v1/videos'],
    ] as const) {
      const res = await call(method, path, method === 'GET' ? undefined : {});
      expect(res.status).toBe(404);
      expect(res.body).toBe(none.body);
    }
    const enabled = build();
    expect(isApiPath('/openai/v1/models', enabled.service)).toBe(true);
    expect(isApiPath('/openai/v2/models', enabled.service)).toBe(false);
  });

  it('is no part of the served OpenAPI document, on or off', async () => {
    const { service } = build();
    const doc = parse(await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} }));
    expect(Object.keys(doc.paths).filter((p) => p.includes('openai'))).toEqual([]);
  });

  it('checks its options', () => {
    expect(() => build({ openai: { enabled: true, maxWaitSeconds: 0 } })).toThrow(InvalidOptionsError);
    expect(() => build({ openai: { enabled: true, wait: 3 } as never })).toThrow(/openai: unknown option wait/);
  });
});

describe('the OpenAI-compatible surface: errors in OpenAI shape', () => {
  it('401 without a valid key, 403 without the scope, 404 for an unknown path, 405 with Allow', async () => {
    const { service, call } = build();
    const noKey = await service.handle({ method: 'GET', path: '/openai/v1/models', headers: {} });
    expect(noKey.status).toBe(401);
    expect(noKey.headers['www-authenticate']).toBe('Bearer');
    expect(openAiError(noKey)).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key', param: null });
    const reader = await service.accounts.createKey('u', { name: 'reader', scopes: ['read'] });
    const forbidden = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x' }, { authorization: `Bearer ${reader.apiKey}` });
    expect(forbidden.status).toBe(403);
    expect(openAiError(forbidden).type).toBe('permission_error');
    const unknown = await call('GET', '/openai/v1/nope');
    expect(unknown.status).toBe(404);
    openAiError(unknown);
    const wrongMethod = await call('PUT', '/openai/v1/models', {});
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('GET, HEAD');
    expect(openAiError(wrongMethod).code).toBe('method_not_allowed');
  });

  it('408 for a body that did not arrive in time, in OpenAI shape like every other refusal of a body', async () => {
    const { service } = build();
    const late = await service.handle({ method: 'POST', path: '/openai/v1/images/generations', headers: { authorization: 'Bearer k' }, bodyError: 'timeout' });
    expect(late.status).toBe(408);
    expect(late.headers.connection).toBe('close');
    expect(openAiError(late)).toMatchObject({ type: 'server_error', code: 'timeout', param: null });
  });

  it('400 naming the parameter: the control fields, a value the model does not take, content it has no place for, a body that is no object', async () => {
    const { call, ledger } = build();
    const cases: Array<[unknown, string]> = [
      [{ model: 'img', prompt: 'x', n: 11 }, 'n'],
      [{ model: 'img', prompt: 'x', response_format: 'jpeg' }, 'response_format'],
      [{ model: 'img', prompt: 'x', partial_images: 4, stream: true }, 'partial_images'],
      [{ model: 'img', prompt: 'x', n: 2, stream: true }, 'n'],
      [{ model: 'img', prompt: 'x', size: '1024x1024' }, 'size'],
      [{ model: 'img' }, 'prompt'],
      [{ prompt: 'x' }, 'model'],
      // Longer than any model id (the native API's limit): refused, not looked up and echoed back whole.
      [{ model: 'm'.repeat(100_000), prompt: 'x' }, 'model'],
    ];
    for (const [body, param] of cases) {
      const res = await call('POST', '/openai/v1/images/generations', body);
      expect(res.status, JSON.stringify(body).slice(0, 100)).toBe(400);
      expect(openAiError(res).param, JSON.stringify(body).slice(0, 100)).toBe(param);
      expect(String(res.body).length).toBeLessThan(1000);
    }
    const speech = await call('POST', '/openai/v1/audio/speech', { model: 'img', input: 'x' });
    expect(speech.status).toBe(400);
    expect(openAiError(speech)).toMatchObject({ param: 'model', type: 'invalid_request_error' });
    // Two fields that go to one setting (`image` and `input_reference` to the image setting), one of them no list of
    // URLs: a 400 naming a field, not a 500; and nothing is charged.
    for (const body of [
      { model: 'img', prompt: 'x', image: 'https://x/a.png', input_reference: 5 },
      { model: 'img', prompt: 'x', image: {}, input_reference: 'https://x/a.png' },
      { model: 'img', prompt: 'x', image: ['https://x/a.png'], input_reference: { url: 'https://x/b.png' } },
    ]) {
      const res = await call('POST', '/openai/v1/images/generations', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(['image', 'input_reference'], JSON.stringify(body)).toContain(openAiError(res).param);
    }
    expect(await ledger.account('u')).toMatchObject({ balance: 100, reserved: 0 });
    const notObject = await call('POST', '/openai/v1/images/generations', [1]);
    expect(notObject.status).toBe(400);
    expect(openAiError(notObject).param).toBeNull();
  });

  it('429 with Retry-After when the create class is used up', async () => {
    const { call } = build({ rateLimits: { create: { points: 1, durationSeconds: 60 } } });
    expect((await call('POST', '/openai/v1/videos', { model: 'img', prompt: 'x' })).status).toBe(400);
    const limited = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(openAiError(limited)).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
  });

  it('402 insufficient_quota, and n images charged as n generations (all or none started)', async () => {
    const { service, call, ledger, keys } = build();
    await service.start();
    const two = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x', n: 2 });
    expect(two.status).toBe(200);
    expect(parse(two).data).toHaveLength(2);
    expect(parse(two).usage.total_tokens).toBe(6);
    expect(await ledger.balance('u')).toBe(94);
    // A user with 8 tokens asks for three images of 3: two are started, the third is refused.
    await keys.addKey('kp', 'p');
    await ledger.credit('p', 8);
    const tooMany = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x', n: 3, response_format: 'url' }, { authorization: 'Bearer kp' });
    expect(tooMany.status).toBe(402);
    expect(openAiError(tooMany)).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    // The ones started before the refused one were cancelled (free while pending, the failure fee of 0 after).
    expect(await ledger.account('p')).toMatchObject({ balance: 8, reserved: 0 });
  });
});

describe('the OpenAI-compatible surface: holding a request', () => {
  it('408 past openai.maxWaitSeconds; the same Idempotency-Key then waits for the same generation', async () => {
    const clock = new FakeClock();
    const { service, call, gate } = build({ clock, ledger: new MemoryLedger({ clock, balances: { u: 100 } }), openai: { enabled: true, maxWaitSeconds: 5 } });
    await service.start();
    const first = call('POST', '/openai/v1/images/generations', { model: 'held', prompt: 'x' }, { 'idempotency-key': 'hold-1' });
    await gate.reached(1);
    await clock.advance(6000);
    const timedOut = await first;
    expect(timedOut.status).toBe(408);
    expect(openAiError(timedOut)).toMatchObject({ type: 'server_error', code: 'timeout' });
    const again = call('POST', '/openai/v1/images/generations', { model: 'held', prompt: 'x' }, { 'idempotency-key': 'hold-1' });
    gate.open();
    const done = await again;
    expect(done.status).toBe(200);
    expect(Buffer.from(parse(done).data[0].b64_json, 'base64')).toEqual(Buffer.from(PNG_BYTES));
  });

  it('a held request with none of the user\'s stream slots free is a 429 before anything is started or charged', async () => {
    const { service, call, ledger, gate } = build({ limits: { streamsPerUser: 1 } });
    await service.start();
    // The user's one slot: an event stream of a generation that stays running.
    const created = await call('POST', '/v1/generations', { modelId: 'held', settings: { prompt: 'x' } });
    const { generationId } = parse(created);
    await gate.reached(1);
    const open = await call('GET', `/v1/generations/${generationId}/events`);
    expect(open.status).toBe(200);
    for (const body of [{ model: 'held', prompt: 'x' }, { model: 'held', prompt: 'x', stream: true }]) {
      const res = await call('POST', '/openai/v1/images/generations', body);
      expect(res.status, JSON.stringify(body)).toBe(429);
      expect(openAiError(res).code).toBe('rate_limit_exceeded');
    }
    // Only the first generation exists and is reserved: the refused requests started none.
    expect((await service.list('u')).data.map((g) => g.generationId)).toEqual([generationId]);
    expect(await ledger.account('u')).toMatchObject({ balance: 98, reserved: 2 });
    await (open.body as AsyncIterable<string>)[Symbol.asyncIterator]().return?.();
    gate.open();
    // Each held request gives its slot back when it is answered, streamed or not: the one slot serves them in turn.
    expect((await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x' })).status).toBe(200);
    const streamed = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x', stream: true });
    expect(await collect(streamed.body)).toContain('image_generation.completed');
    // A stream its client leaves before reading it gives its slot back too.
    const unread = await call('POST', '/openai/v1/images/generations', { model: 'img', prompt: 'x', stream: true });
    expect(unread.status).toBe(200);
    await (unread.body as AsyncIterable<string>)[Symbol.asyncIterator]().return?.();
    const again = await call('GET', `/v1/generations/${generationId}/events`);
    expect(again.status).toBe(200);
    await (again.body as AsyncIterable<string>)[Symbol.asyncIterator]().return?.();
  });

  it('a stream whose generation fails ends with an error event in OpenAI shape', async () => {
    const { service, call, ledger } = build();
    await service.start();
    const res = await call('POST', '/openai/v1/images/generations', { model: 'broken', prompt: 'x', stream: true, partial_images: 1 });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const text = await collect(res.body);
    const events = text.split('\n\n').filter((m) => m.startsWith('event:'));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/^event: error\ndata: /);
    const data = JSON.parse(events[0]!.split('\ndata: ')[1]!);
    expect(data).toMatchObject({ type: 'error', error: { type: 'server_error', code: 'internal' } });
    expect(await ledger.balance('u')).toBe(99);
  });
});

describe('multipart bodies', () => {
  const boundary = 'XyZ';
  const part = (headers: string, content: string | Buffer) => Buffer.concat([Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), Buffer.from(content), Buffer.from('\r\n')]);
  const end = Buffer.from(`--${boundary}--\r\n`);

  it('reads fields, repeated fields and files, names in UTF-8', () => {
    const body = Buffer.concat([
      part('Content-Disposition: form-data; name="prompt"', 'a café'),
      part('Content-Disposition: form-data; name="image[]"; filename="a.png"\r\nContent-Type: image/png', Buffer.from(PNG_BYTES)),
      part('Content-Disposition: form-data; name="image[]"; filename="bé.png"', Buffer.from([0, 13, 10, 45, 45])),
      end,
    ]);
    const form = parseMultipart(body, boundary);
    expect(form.fields.get('prompt')).toEqual(['a café']);
    expect(form.files.map((f) => [f.field, f.filename, f.mimeType, f.bytes.length])).toEqual([
      ['image[]', 'a.png', 'image/png', PNG_BYTES.length],
      ['image[]', 'bé.png', 'application/octet-stream', 5],
    ]);
    expect(boundaryOf('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(boundaryOf('application/json')).toBeUndefined();
  });

  it('refuses what it cannot read whole, and more than MAX_PARTS parts', () => {
    const bad = [
      Buffer.from('no boundary here'),
      Buffer.concat([part('Content-Disposition: form-data; name="a"', 'x').subarray(0, 30)]),
      Buffer.concat([part('Content-Type: text/plain', 'x'), end]),
      Buffer.concat([part('Content-Disposition: form-data', 'x'), end]),
      Buffer.concat([...Array.from({ length: MAX_PARTS + 1 }, (_, i) => part(`Content-Disposition: form-data; name="f${i}"`, 'x')), end]),
      // A file's type becomes the Content-Type it is served with: one no header can carry is refused here.
      Buffer.concat([part('Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\u0001', 'x'), end]),
      Buffer.concat([part('Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image png', 'x'), end]),
    ];
    for (const body of bad) expect(() => parseMultipart(body, boundary)).toThrow(MultipartError);
  });

  it('answers a bad form with a 400 naming the file field it does not take', async () => {
    const { service } = build();
    const body = Buffer.concat([part('Content-Disposition: form-data; name="model"', 'img'), part('Content-Disposition: form-data; name="other"; filename="x"', 'x'), end]);
    const res = await service.handle({ method: 'POST', path: '/openai/v1/images/edits', headers: { authorization: 'Bearer k', 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
    expect(res.status).toBe(400);
    expect(openAiError(res).param).toBe('other');
    const broken = await service.handle({ method: 'POST', path: '/openai/v1/images/edits', headers: { authorization: 'Bearer k', 'content-type': `multipart/form-data; boundary=${boundary}` }, body: 'junk' });
    expect(broken.status).toBe(400);
    const badType = Buffer.concat([part('Content-Disposition: form-data; name="model"', 'img'), part('Content-Disposition: form-data; name="prompt"', 'x'), part('Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\u0001', Buffer.from(PNG_BYTES)), end]);
    const typed = await service.handle({ method: 'POST', path: '/openai/v1/images/edits', headers: { authorization: 'Bearer k', 'content-type': `multipart/form-data; boundary=${boundary}` }, body: badType });
    expect(typed.status).toBe(400);
    expect(openAiError(typed).code).toBe('invalid_request');
    const text = await service.handle({ method: 'POST', path: '/openai/v1/images/edits', headers: { authorization: 'Bearer k', 'content-type': 'text/plain' }, body: 'x' });
    expect(text.status).toBe(415);
  });
  it('keeps no uploaded file of a request it refuses (no place for the image, a bad value, too few tokens)', async () => {
    const live = new Set<string>();
    class Blobs extends MemoryBlobStore {
      override async put(bytes: Uint8Array, mimeType: string): Promise<string> {
        const key = await super.put(bytes, mimeType);
        live.add(key);
        return key;
      }
      override async delete(key: string): Promise<void> {
        live.delete(key);
        await super.delete(key);
      }
    }
    const uploadStore = new MemoryUploadStore();
    const { service, keys, ledger } = build({ blobs: new Blobs(), uploadStore });
    await keys.addKey('kp', 'p');
    const image = part('Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png', Buffer.from(PNG_BYTES));
    const cases: Array<[string, Buffer, number]> = [
      ['k', Buffer.concat([part('Content-Disposition: form-data; name="model"', 'held'), part('Content-Disposition: form-data; name="prompt"', 'x'), image, end]), 400],
      ['k', Buffer.concat([part('Content-Disposition: form-data; name="model"', 'img'), part('Content-Disposition: form-data; name="prompt"', 'x'), part('Content-Disposition: form-data; name="size"', '9x9'), image, end]), 400],
      ['kp', Buffer.concat([part('Content-Disposition: form-data; name="model"', 'img'), part('Content-Disposition: form-data; name="prompt"', 'x'), image, end]), 402],
    ];
    for (const [key, body, status] of cases) {
      const res = await service.handle({ method: 'POST', path: '/openai/v1/images/edits', headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
      expect(res.status).toBe(status);
      expect(live.size).toBe(0);
      expect(await uploadStore.listExpiredBefore(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    }
    expect(await ledger.account('u')).toMatchObject({ balance: 100, reserved: 0 });
  });
});

describe('the mapping', () => {
  it('sends a field to the setting its model maps it to, as the setting takes it; content without a place is a 400', () => {
    const model = { ...image, openai: { params: { seconds: 'size' } } };
    expect(settingsOf(model, { model: 'img', prompt: 'p', seconds: 64, quality: 'hd', image: ['https://x/a.png'] }, ['model'])).toEqual({ prompt: 'p', size: '64', refs: ['https://x/a.png'] });
    expect(() => settingsOf(model, { mask: ['https://x/m.png'] }, [])).toThrow(/mask/);
  });
});
