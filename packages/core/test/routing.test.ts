/**
 * The router's edges, and the Bearer parser: a scan, not a regular expression (every authenticated request passes
 * through it), pinned by a property to the regular expression it replaced.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bearerKey } from '../src/http/respond.js';
import { apiRoots, isApiPath } from '../src/node/node-body.js';
import { allowedMethods, matchRoute } from '../src/http/routes.js';

describe('routing', () => {
  it('examples: a trailing slash, the playground without one, a file name with none', () => {
    expect(matchRoute('GET', '/v1/generations/abc/')).toMatchObject({ name: 'get', id: 'abc', template: '/v1/generations/{id}' });
    expect(matchRoute('GET', '/v1/generations//')).toMatchObject({ status: 404 });
    expect(matchRoute('GET', '/playground')).toMatchObject({ name: 'playground', asset: '' });
    expect(matchRoute('GET', '/playground/app.js')).toMatchObject({ name: 'playground', asset: '/app.js' });
    expect(matchRoute('GET', '/playgroundx')).toMatchObject({ status: 404 });
    expect(matchRoute('GET', '/v1/files/k1/')).toMatchObject({ status: 404 });
    expect(matchRoute('GET', '/v1/openapi.json/')).toMatchObject({ status: 404 });
    expect(matchRoute('PUT', '/v1/generations')).toMatchObject({ status: 405, headers: { allow: 'GET, HEAD, POST' } });
  });
});

describe('bearerKey', () => {
  const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;
  const header = fc.oneof(
    fc.tuple(
      fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR', 'Bearer:', 'Basic', 'Bear', 'Bearerx', 'ſearer'),
      fc.constantFrom('', ' ', '  ', '\t', ' \t'),
      fc.oneof(fc.string({ minLength: 0, maxLength: 20 }), fc.string({ unit: fc.constantFrom('a', '~', '!', ' ', '\u007f', 'é', '\u0000'), maxLength: 8 }), fc.constant('k'.repeat(512)), fc.constant('k'.repeat(513))),
      fc.constantFrom('', ' ', '\n', '\u00a0'),
      fc.constantFrom('', ' ', '\u2003'),
    ).map(([scheme, gap, key, after, before]) => `${before}${scheme}${gap}${key}${after}`),
    fc.string({ maxLength: 30 }),
  );

  it('answers the key exactly where the former regular expression did', () => {
    fc.assert(
      fc.property(header, (h) => {
        expect(bearerKey(h)).toBe(BEARER.exec(h.trim())?.[1]);
      }),
      { numRuns: 20_000 },
    );
    expect(bearerKey(undefined)).toBeUndefined();
    expect(bearerKey('')).toBeUndefined();
    expect(bearerKey('  bearer   abc  ')).toBe('abc');
  });
});

describe('what a mount answers: apiRoots and isApiPath, the one list', () => {
  it('lists the roots longest first, with the OpenAI surface and the console only when served', () => {
    expect(apiRoots().map((r) => r.path)).toEqual(['/playground', '/healthz', '/readyz', '/v1']);
    const both = apiRoots({ servesOpenAi: true, servesConsole: true });
    expect(both.map((r) => `${r.path}${r.below ? '/*' : ''}`)).toEqual(['/playground/*', '/openai/v1/*', '/console/*', '/healthz', '/readyz', '/v1/*']);
    expect(apiRoots({ servesConsole: true })).toBe(apiRoots({ servesConsole: true }));
  });

  it('answers the roots, below them where they have paths below, and nothing else', () => {
    const served = { servesOpenAi: true, servesConsole: true };
    for (const path of ['/v1', '/v1/', '/v1/models', '/playground', '/playground/x', '/healthz', '/healthz/', '/readyz', '/openai/v1/models', '/console', '/console/me']) {
      expect(isApiPath(path, served), path).toBe(true);
    }
    for (const path of ['/', '/v10', '/v2/models', '/healthz/x', '/readyz/deep', '/openai/v2', '/consoles', '/playgrounds', '/api/v1']) {
      expect(isApiPath(path, served), path).toBe(false);
    }
    expect(isApiPath('/console/me')).toBe(false);
    expect(isApiPath('/openai/v1/models', { servesConsole: true })).toBe(false);
  });
});
