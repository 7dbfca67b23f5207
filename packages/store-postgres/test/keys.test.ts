import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeKey, encodeKey } from '../src/db.js';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe('identifier escaping', () => {
  it('round-trips every string and yields text PostgreSQL stores exactly', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const stored = encodeKey(s);
        expect(decodeKey(stored)).toBe(s);
        expect(stored.includes('\u0000')).toBe(false);
        expect(LONE_SURROGATE.test(stored)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it('never maps two strings to one stored value', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
        if (a !== b) expect(encodeKey(a)).not.toBe(encodeKey(b));
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves ordinary ids, backslashes included, untouched', () => {
    for (const s of ['user-1', 'DOMAIN\\alice', 'ünïcødé 😀', "' OR 1=1 --", '']) expect(encodeKey(s)).toBe(s);
  });
});
