import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import type { User } from './fixture.js';
import { chunkedBody, type Reply } from './http.js';
import { bodyOfSize, JSON_TYPE, mismatches, useFixture, withHeld, type ModeContext } from './kit.js';

/** `settings.refs.0` and `refs[0]` both name the setting `refs`. */
function settingOf(field: string): string {
  return field.replace(/^settings\./, '').split(/[.[]/)[0]!;
}

/** POST /v1/generations: the answer, the reserve, Idempotency-Key. */
export function defineCreateTests({ fx }: ModeContext): void {
  describe('POST /v1/generations', () => {
    it('answers 201 with only { generationId }, a URL-safe id of at least 122 random bits', async () => {
      const user = await fx.user();
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const r = await fx.create(user, { modelId: 'noop' });
        expect(r.status, r.text).toBe(201);
        expect(r.contentType).toMatch(JSON_TYPE);
        expect(Object.keys(r.body)).toEqual(['generationId']);
        expect(r.body.generationId).toMatch(/^[A-Za-z0-9_-]{21,}$/);
        ids.add(r.body.generationId);
      }
      expect(ids.size).toBe(5);
    });

    it('answers before the provider has finished, and the work goes on in the background', async () => {
      const user = await fx.user();
      const ids: string[] = [];
      await withHeld(fx, user, ids, async () => {
        const before = fx.gate.total;
        const r = await fx.create(user, { modelId: 'held' });
        expect(r.status, r.text).toBe(201);
        ids.push(r.body.generationId);
        // The gate is closed, so the provider cannot have returned before this answer.
        const first = await fx.get(user, r.body.generationId);
        expect(first.body).toStrictEqual({ status: expect.stringMatching(/^(pending|processing)$/) });
        await fx.gate.reached(before + 1);
        fx.gate.release();
        const done = await fx.terminal(user, r.body.generationId);
        expect(done).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
      });
    });

    it('accepts a charset parameter, and omitted or empty settings when none are required', async () => {
      const user = await fx.user();
      const withCharset = await fx.call('/v1/generations', {
        method: 'POST',
        headers: { ...user.auth, 'content-type': 'application/json; charset=utf-8' },
        body: '{"modelId":"noop"}',
      });
      expect(withCharset.status, withCharset.text).toBe(201);
      expect((await fx.create(user, { modelId: 'noop', settings: {} })).status).toBe(201);
    });

    it('reserves the price at once', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'echo', settings: { prompt: 'x' } });
      expect(r.status).toBe(201);
      expect(await fx.balance(user)).toBe(90);
      await fx.terminal(user, r.body.generationId);
      expect(await fx.balance(user)).toBe(90);
    });

    it('takes a priority: each reserves the price times its multiplier, and the quote shows that multiplier', async () => {
      const user = await fx.user(100);
      const high = await fx.create(user, { modelId: 'echo', settings: { prompt: 'x' }, priority: 'high' });
      expect(high.status, high.text).toBe(201);
      expect(Object.keys(high.body)).toEqual(['generationId']);
      expect(await fx.balance(user)).toBe(80);
      const deadline = new Date(Date.now() + 3_600_000).toISOString();
      const low = await fx.create(user, { modelId: 'echo', settings: { prompt: 'x' }, priority: 'low', deadline });
      expect(low.status, low.text).toBe(201);
      expect(await fx.balance(user)).toBe(75);
      expect(await fx.terminal(user, low.body.generationId)).toStrictEqual({ status: 'completed', result: 'echo: x', price: 5 });
      expect(await fx.terminal(user, high.body.generationId)).toStrictEqual({ status: 'completed', result: 'echo: x', price: 20 });
      const quote = await fx.call('/v1/quotes', { method: 'POST', headers: user.auth, json: { modelId: 'echo', settings: { prompt: 'x' }, priority: 'low' } });
      expect(quote.body).toStrictEqual({ price: 5, balance: 75, priority: 'low', multiplier: 0.5 });
    });

    it('refuses a bad priority or a deadline without priority low: 400 naming the field, nothing reserved', async () => {
      const user = await fx.user(100);
      const soon = new Date(Date.now() + 3_600_000).toISOString();
      for (const [body, field] of [
        [{ priority: 'urgent' }, 'priority'],
        [{ priority: 'high', deadline: soon }, 'deadline'],
        [{ deadline: soon }, 'deadline'],
        [{ priority: 'low', deadline: 'next week' }, 'deadline'],
        [{ priority: 'low', deadline: '2000-01-01T00:00:00Z' }, 'deadline'],
      ] as const) {
        const r = await fx.create(user, { modelId: 'noop', ...body });
        expectError(r, 400, 'invalid_request');
        expect(r.body.error.details.map((d: { field: string }) => d.field), JSON.stringify(body)).toContain(field);
      }
      expect(await fx.balance(user)).toBe(100);
    });

    it('passes Idempotency-Key through: a repeat returns the same generation and charges once', async () => {
      const user = await fx.user(100);
      const key = randomBytes(8).toString('hex');
      const send = (): Promise<Reply> =>
        fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'idempotency-key': key }, json: { modelId: 'echo', settings: { prompt: 'p' } } });
      const a = await send();
      const b = await send();
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.body.generationId).toBe(a.body.generationId);
      expect(await fx.balance(user)).toBe(90);
    });

    it('Idempotency-Key: racing repeats make one generation (201 or 409), another body is 422, keys are per user', async () => {
      const user = await fx.user(100);
      const other = await fx.user(100);
      const key = randomBytes(8).toString('hex');
      const send = (u: User, prompt: string): Promise<Reply> =>
        fx.call('/v1/generations', { method: 'POST', headers: { ...u.auth, 'idempotency-key': key }, json: { modelId: 'echo', settings: { prompt } } });
      const replies = await Promise.all(Array.from({ length: 10 }, () => send(user, 'same')));
      for (const r of replies) expect([201, 409], r.text).toContain(r.status);
      for (const r of replies.filter((x) => x.status === 409)) expectError(r, 409, 'idempotency_conflict');
      const ids = new Set(replies.filter((r) => r.status === 201).map((r) => r.body.generationId as string));
      expect(ids.size).toBe(1);
      expect(await fx.balance(user)).toBe(90);
      expectError(await send(user, 'different'), 422, 'idempotency_mismatch');
      const theirs = await send(other, 'same');
      expect(theirs.status).toBe(201);
      expect(ids.has(theirs.body.generationId as string)).toBe(false);
      const bad = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'idempotency-key': 'x'.repeat(300) }, json: { modelId: 'echo', settings: { prompt: 'p' } } });
      expectError(bad, 400, 'invalid_request');
    });
  });
}

/** What a create refuses, and that a refusal charges nothing. */
export function defineValidationTests({ fx }: ModeContext): void {
  describe('request validation', () => {
    it('answers 400 invalid_json to a body that is not JSON', async () => {
      const user = await fx.user(100);
      const bodies: Array<[string, string | Uint8Array]> = [
        ['garbage', '{bad'],
        ['truncated', '{"modelId":'],
        ['empty', ''],
        ['trailing brace', '{"modelId":"noop"}}'],
        ['single quotes', "{'modelId':'noop'}"],
        ['invalid UTF-8', Uint8Array.from([0x7b, 0xff, 0xfe, 0x7d])],
      ];
      const results = [];
      for (const [label, body] of bodies) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
        results.push({ label, reply, status: 400, code: 'invalid_json' });
      }
      expect(mismatches(results)).toEqual([]);
      expectError(results[0]!.reply, 400, 'invalid_json');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 400 invalid_request to JSON that is not an object with a string modelId and object settings', async () => {
      const user = await fx.user(100);
      const bodies = [
        '[]',
        '[{"modelId":"noop"}]',
        '"noop"',
        '42',
        'null',
        'true',
        '{}',
        '{"settings":{}}',
        '{"modelId":5}',
        '{"modelId":null}',
        '{"modelId":""}',
        '{"modelId":["noop"]}',
        '{"modelId":{"id":"noop"}}',
        '{"modelId":"noop","settings":"x"}',
        '{"modelId":"noop","settings":[]}',
        '{"modelId":"noop","settings":5}',
        '{"modelId":"noop","settings":null}',
      ];
      const results = [];
      for (const body of bodies) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
        results.push({ label: body, reply, status: 400, code: 'invalid_request' });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 400, 'invalid_request');
      const missing = results.find((r) => r.label === '{}')!.reply;
      expect(missing.body.error.details?.map((d: { field: string }) => d.field)).toContain('modelId');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 400 invalid_settings listing every bad field, and charges nothing', async () => {
      const user = await fx.user(50);
      const url = (n: number): string => `https://example.com/ref-${n}.png`;
      const cases: Array<[string, Record<string, unknown>, string[]]> = [
        ['missing required setting', {}, ['prompt']],
        ['empty required text', { prompt: '' }, ['prompt']],
        ['value outside the select options', { prompt: 'a', style: 'neon' }, ['style']],
        ['number for a text setting', { prompt: 5 }, ['prompt']],
        ['number for a select setting', { prompt: 'a', style: 1 }, ['style']],
        ['object for a text setting', { prompt: { a: 1 } }, ['prompt']],
        ['unknown setting name', { prompt: 'a', colour: 'red' }, ['colour']],
        ['media setting as a string', { prompt: 'a', refs: url(1) }, ['refs']],
        ['ftp media URL', { prompt: 'a', refs: ['ftp://example.com/a.png'] }, ['refs']],
        ['javascript: media URL', { prompt: 'a', refs: ['javascript:alert(1)'] }, ['refs']],
        ['file: media URL', { prompt: 'a', refs: ['file:///etc/passwd'] }, ['refs']],
        ['data: media URL', { prompt: 'a', refs: ['data:image/png;base64,AAAA'] }, ['refs']],
        ['relative media URL', { prompt: 'a', refs: ['/images/a.png'] }, ['refs']],
        ['non-string media URL', { prompt: 'a', refs: [42] }, ['refs']],
        ['too many media URLs', { prompt: 'a', refs: Array.from({ length: 11 }, (_, i) => url(i)) }, ['refs']],
        ['too long media URL', { prompt: 'a', refs: [`https://example.com/${'a'.repeat(2100)}`] }, ['refs']],
        ['too long text', { prompt: 'a'.repeat(10_001) }, ['prompt']],
        ['every kind at once', { prompt: 5, style: 'neon', colour: 'red', refs: ['ftp://example.com/a.png'] }, ['prompt', 'style', 'colour', 'refs']],
      ];
      const problems: string[] = [];
      for (const [label, settings, fields] of cases) {
        const r = await fx.create(user, { modelId: 'settings', settings });
        try {
          expectError(r, 400, 'invalid_settings');
        } catch {
          problems.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
          continue;
        }
        const named = new Set<string>((r.body.error.details ?? []).map((d: { field: string }) => settingOf(d.field)));
        const absent = fields.filter((f) => !named.has(f));
        if (absent.length > 0) problems.push(`${label}: details do not name ${absent.join(', ')} (${r.text.slice(0, 200)})`);
      }
      expect(problems).toEqual([]);
      expect(await fx.balance(user)).toBe(50);
      const ok = await fx.create(user, {
        modelId: 'settings',
        settings: { prompt: 'a', style: 'vivid', refs: [url(1), 'http://example.com/b.jpg'], notes: 'n' },
      });
      expect(ok.status, ok.text).toBe(201);
    });

    it('answers 404 model_not_found to an unknown model, and charges nothing', async () => {
      const user = await fx.user(100);
      expectError(await fx.create(user, { modelId: 'no-such-model' }), 404, 'model_not_found');
      expectError(await fx.create(user, { modelId: 'NOOP' }), 404, 'model_not_found');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 402 insufficient_funds when the balance cannot cover the price', async () => {
      const broke = await fx.user(0);
      expectError(await fx.create(broke, { modelId: 'noop' }), 402, 'insufficient_funds');
      const short = await fx.user(9);
      expectError(await fx.create(short, { modelId: 'echo', settings: { prompt: 'x' } }), 402, 'insufficient_funds');
      expect(await fx.balance(short)).toBe(9);
      const exact = await fx.user(10);
      expect((await fx.create(exact, { modelId: 'echo', settings: { prompt: 'x' } })).status).toBe(201);
      expect(await fx.balance(exact)).toBe(0);
    });

    it('answers 415 unsupported_media_type to a body that is not declared JSON', async () => {
      const user = await fx.user(100);
      const json = '{"modelId":"noop"}';
      const cases: Array<[string, Record<string, string>, string | Uint8Array]> = [
        ['text/plain', { 'content-type': 'text/plain' }, json],
        ['no Content-Type', {}, new TextEncoder().encode(json)],
        ['form', { 'content-type': 'application/x-www-form-urlencoded' }, 'modelId=noop'],
        ['text/json', { 'content-type': 'text/json' }, json],
        ['application/jsonx', { 'content-type': 'application/jsonx' }, json],
        ['multipart', { 'content-type': 'multipart/form-data; boundary=x' }, `--x\r\nContent-Disposition: form-data; name="modelId"\r\n\r\nnoop\r\n--x--\r\n`],
      ];
      const results = [];
      for (const [label, headers, body] of cases) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, ...headers }, body });
        results.push({ label, reply, status: 415, code: 'unsupported_media_type' });
      }
      expect(mismatches(results)).toEqual([]);
      expectError(results[0]!.reply, 415, 'unsupported_media_type');
      expect(await fx.balance(user)).toBe(100);
    });
  });
}

/** The body size limit, with and without a declared length. */
export function defineBodyLimitTests({ fx, mount, mode }: ModeContext): void {
  describe('body size limit', () => {
    it('answers 413 payload_too_large above the limit, with or without Content-Length', async () => {
      const user = await fx.user(100);
      const limit = fx.service.bodyLimit;
      const headers = { ...user.auth, 'content-type': 'application/json' };
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(limit + 1) }), 413, 'payload_too_large');
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(limit + 1)) }), 413, 'payload_too_large');
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(8 * limit) }), 413, 'payload_too_large');
      // The connection (or the server) still serves the next request.
      expect((await fx.create(user, { modelId: 'noop' })).status).toBe(201);
    });

    if (!mode.hostParsers) {
      // A host parser applies its own limit first (express.json(): 100 kB), so only without one is the edge exact.
      it('accepts a body of exactly the limit', async () => {
        const user = await fx.user(100);
        const headers = { ...user.auth, 'content-type': 'application/json' };
        const r = await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(fx.service.bodyLimit) });
        expect(r.status, r.text.slice(0, 200)).toBe(201);
        const chunked = await fx.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(fx.service.bodyLimit)) });
        expect(chunked.status, chunked.text.slice(0, 200)).toBe(201);
      });
    }

    describe('with a configured limit of 2048 bytes', () => {
      const small = useFixture(mount, mode, { limits: { bodyBytes: 2048 } });

      it('uses the service limit, not a default of its own', async () => {
        const user = await small.user(100);
        const headers = { ...user.auth, 'content-type': 'application/json' };
        expect(small.service.bodyLimit).toBe(2048);
        expectError(await small.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(2049) }), 413, 'payload_too_large');
        if (!mode.hostParsers) {
          // With a host parser in front, a chunked body has no declared size and the host read it, not genservice.
          expectError(await small.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(2049), 512) }), 413, 'payload_too_large');
          const atLimit = await small.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(2048) });
          expect(atLimit.status, atLimit.text).toBe(201);
        }
      });
    });
  });
}
