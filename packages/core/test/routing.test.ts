/**
 * The router's edges, and the Bearer parser: a scan, not a regular expression (every authenticated request passes
 * through it), pinned by a property to the regular expression it replaced.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bearerKey } from '../src/http/respond.js';
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
