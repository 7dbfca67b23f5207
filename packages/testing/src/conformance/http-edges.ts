import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import { CORS_ORIGIN, IMAGE_BYTES } from './fixture.js';
import { call, rawExchange } from './http.js';
import { mismatches, useFixture, type ModeContext } from './kit.js';

/** Headers every answer carries, HEAD, byte ranges and CORS. */
export function defineHeaderTests({ fx }: ModeContext): void {
  describe('headers, HEAD, ranges and CORS', () => {
    it('sends X-Content-Type-Options: nosniff with every JSON answer, errors included', async () => {
      const user = await fx.user();
      for (const [path, init] of [
        ['/v1/models', { headers: user.auth }],
        ['/v1/balance', { headers: user.auth }],
        ['/v1/generations', { headers: user.auth }],
        ['/v1/models', {}],
        ['/v1/nope', { headers: user.auth }],
      ] as const) {
        const r = await fx.call(path, init);
        expect(r.headers.get('x-content-type-options'), `${path} ${r.status}`).toBe('nosniff');
      }
    });

    it('answers HEAD with the Content-Length a GET sends, and no body', async () => {
      const user = await fx.user(77);
      for (const path of ['/v1/models', '/v1/balance', '/v1/openapi.json']) {
        const get = await fx.call(path, { headers: user.auth });
        const head = await fx.call(path, { method: 'HEAD', headers: user.auth });
        expect(head.status, path).toBe(200);
        expect(head.bytes.length).toBe(0);
        expect(head.headers.get('content-length'), path).toBe(String(get.bytes.length));
      }
      const unauth = await fx.call('/v1/models', { method: 'HEAD' });
      const unauthGet = await fx.call('/v1/models');
      expect(unauth.status).toBe(401);
      expect(unauth.headers.get('content-length')).toBe(String(unauthGet.bytes.length));
    });

    it('serves byte ranges of a file (206, Accept-Ranges, Content-Range) and names it in Content-Disposition', async () => {
      const user = await fx.user();
      const r = await fx.create(user, { modelId: 'image' });
      const url = (await fx.terminal(user, r.body.generationId)).result!;
      const whole = await call(url);
      expect(whole.status).toBe(200);
      expect(whole.headers.get('accept-ranges')).toBe('bytes');
      expect(whole.headers.get('content-disposition')).toMatch(/^inline; filename="[A-Za-z0-9_.-]+\.png"$/);
      const size = IMAGE_BYTES.length;
      const cases: Array<[string, number, number]> = [
        ['bytes=0-99', 0, 99],
        ['bytes=100-', 100, size - 1],
        ['bytes=-50', size - 50, size - 1],
        [`bytes=10-${size + 500}`, 10, size - 1],
      ];
      for (const [range, first, last] of cases) {
        const part = await call(url, { headers: { range } });
        expect(part.status, range).toBe(206);
        expect(part.headers.get('content-range'), range).toBe(`bytes ${first}-${last}/${size}`);
        expect(part.headers.get('content-length'), range).toBe(String(last - first + 1));
        expect(Buffer.compare(part.bytes, Buffer.from(IMAGE_BYTES.subarray(first, last + 1))), range).toBe(0);
      }
      const beyond = await call(url, { headers: { range: `bytes=${size}-` } });
      expect(beyond.status).toBe(416);
      expect(beyond.headers.get('content-range')).toBe(`bytes */${size}`);
      // Several ranges, another unit or garbage: the whole file.
      for (const range of ['bytes=0-1,5-6', 'items=0-1', 'bytes=abc', 'bytes=9-3']) {
        const full = await call(url, { headers: { range } });
        expect(full.status, range).toBe(200);
        expect(full.bytes.length).toBe(size);
      }
      // A tampered URL is refused whatever the range.
      const tampered = url.replace(/sig=(.)/, (_m, c: string) => `sig=${c === 'A' ? 'B' : 'A'}`);
      expect((await call(tampered, { headers: { range: 'bytes=0-1' } })).status).toBe(403);
    });

    it('answers a CORS preflight from an allowed origin, and adds the CORS headers to its requests', async () => {
      const user = await fx.user(5);
      const pre = await fx.call('/v1/generations', {
        method: 'OPTIONS',
        headers: { origin: CORS_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
      expect(pre.status, pre.text).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
      expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
      expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
      expect(pre.headers.get('access-control-max-age')).toMatch(/^\d+$/);
      const get = await fx.call('/v1/balance', { headers: { ...user.auth, origin: CORS_ORIGIN } });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
      expect(get.headers.get('vary')).toMatch(/Origin/);
      const denied = await fx.call('/v1/balance', { headers: { origin: CORS_ORIGIN } });
      expect(denied.status).toBe(401);
      expect(denied.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
    });

    it('gives an origin it does not allow no CORS headers, preflight or not', async () => {
      const user = await fx.user();
      for (const origin of ['https://evil.example', 'null', `${CORS_ORIGIN}.evil.example`, CORS_ORIGIN.toUpperCase()]) {
        const pre = await fx.call('/v1/generations', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
        expect(pre.headers.get('access-control-allow-origin'), origin).toBeNull();
        const get = await fx.call('/v1/balance', { headers: { ...user.auth, origin } });
        expect(get.status).toBe(200);
        expect(get.headers.get('access-control-allow-origin'), origin).toBeNull();
      }
    });
  });
}

/** Hostile bodies and paths: compressed bodies, broken percent-encoding, bodies that stop arriving. */
export function defineHostileTests({ fx, mount, mode }: ModeContext): void {
  describe('hostile bodies and paths', () => {
    it('answers 415 to a compressed body (Content-Encoding), and charges nothing', async () => {
      const user = await fx.user(100);
      const json = JSON.stringify({ modelId: 'noop', settings: {} });
      for (const [encoding, body] of [
        ['gzip', gzipSync(json)],
        ['gzip', Buffer.from(json)],
        ['br', Buffer.from(json)],
      ] as const) {
        const r = await fx.call('/v1/generations', {
          method: 'POST',
          headers: { ...user.auth, 'content-type': 'application/json', 'content-encoding': encoding },
          body: new Uint8Array(body),
        });
        expectError(r, 415, 'unsupported_media_type');
      }
      expect(await fx.balance(user)).toBe(100);
    });

    it("answers URLs with broken percent-encoding with the service's own JSON answer, never the framework's (issue 24, item 8)", async () => {
      const user = await fx.user();
      const results = [];
      for (const [method, path, status, code] of [
        ['GET', '/v1/generations/%', 404, 'not_found'],
        ['GET', '/v1/generations/%ZZ', 404, 'not_found'],
        ['POST', '/v1/generations/%ZZ/cancel', 404, 'not_found'],
        ['GET', '/v1/generations/%E0%A4%A/events', 404, 'not_found'],
        // A file URL without a valid signature: the files route's own answer.
        ['GET', '/v1/files/%E0%A4%A', 403, 'forbidden'],
        ['GET', '/v1/files/%', 403, 'forbidden'],
      ] as const) {
        results.push({ label: `${method} ${path}`, reply: await fx.call(path, { method, headers: user.auth }), status, code });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, r.status, r.code);
    });

    if (mode.prefix !== '') {
      it('answers a path under the prefix that is not an API route with the JSON 404', async () => {
        const user = await fx.user();
        for (const path of ['/nope', '/v2/generations', '/playgroundx']) {
          expectError(await fx.call(path, { headers: user.auth }), 404, 'not_found');
        }
      });
    }

    if (!mode.hostParsers) {
      // A host body parser in front reads (and drains) the body by its own rules before genservice sees the request;
      // mount genservice before it for these (docs/adapters.md).
      it('answers 400 invalid_json to invalid UTF-8 inside a JSON string (not replaced by U+FFFD and accepted)', async () => {
        const user = await fx.user(100);
        const body = Buffer.concat([Buffer.from('{"modelId":"echo","settings":{"prompt":"caf'), Buffer.from([0xe9, 0xff]), Buffer.from('"}}')]);
        const r = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body: new Uint8Array(body) });
        expectError(r, 400, 'invalid_json');
        expect(await fx.balance(user)).toBe(100);
      });

      it('answers a huge declared Content-Length at once, without reading the body: 401 without a key, 413 with one', async () => {
        const user = await fx.user(100);
        const path = `${new URL(fx.baseUrl).pathname.replace(/\/+$/, '')}/v1/generations`;
        const head = (auth: string): string =>
          `POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999${auth}\r\nConnection: close`;
        const anonymous = await rawExchange(fx.baseUrl, head(''), '{"model');
        expect(anonymous.status, anonymous.text).toBe(401);
        const keyed = await rawExchange(fx.baseUrl, head(`\r\nAuthorization: Bearer ${user.key}`), '{"model');
        expect(keyed.status, keyed.text).toBe(413);
        expect(JSON.parse(keyed.text).error.code).toBe('payload_too_large');
        expect(await fx.balance(user)).toBe(100);
      });

      describe('with limits.bodyTimeoutMs of 300', () => {
        const slow = useFixture(mount, mode, { limits: { bodyTimeoutMs: 300 } });

        it('answers 408 to a body that stops arriving, closes the connection, and charges nothing', async () => {
          const user = await slow.user(100);
          expect(slow.service.bodyTimeoutMs).toBe(300);
          const path = `${new URL(slow.baseUrl).pathname.replace(/\/+$/, '')}/v1/generations`;
          // 100 bytes declared, 12 sent, then nothing: the deadline ends it (the test's own wait is far longer).
          const r = await rawExchange(
            slow.baseUrl,
            `POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\nAuthorization: Bearer ${user.key}`,
            '{"modelId":"',
            20_000,
          );
          expect(r.status, r.text).toBe(408);
          expect(JSON.parse(r.text).error.code).toBe('request_timeout');
          expect(r.headers.connection).toBe('close');
          expect(r.closedByServer).toBe(true);
          expect(await slow.balance(user)).toBe(100);
          // A body that arrives in time is unaffected.
          expect((await slow.create(user, { modelId: 'noop' })).status).toBe(201);
        });
      });
    }
  });
}

/** The playground page may reach its own origin only. */
export function definePlaygroundTests({ mount, mode }: ModeContext): void {
  describe('the playground page (issue 24, item 3)', () => {
    const page = useFixture(mount, mode, { playground: true });

    it('may connect to its own origin only: its CSP connect-src names no other origin and no scheme', async () => {
      const r = await page.call('/playground/');
      expect(r.status).toBe(200);
      const csp = r.headers.get('content-security-policy') ?? '';
      const connect = csp.split(';').map((d) => d.trim().split(/\s+/)).find((d) => d[0] === 'connect-src');
      // No publicUrl here: the page's own origin is the only one it may reach (with a publicUrl, that origin too).
      expect(connect).toEqual(['connect-src', "'self'"]);
      expect(csp).toMatch(/script-src 'self'/);
    });

    it('takes no API address from its URL: the key never leaves for another origin', async () => {
      const r = await page.call('/playground/api.js');
      expect(r.status).toBe(200);
      // The page's API base is its own mount point, whatever the query says.
      expect(r.text).not.toMatch(/searchParams|URLSearchParams|location\.search/);
      expect(r.text).toMatch(/new URL\('\.\.\/', location\.href\)/);
    });
  });
}
