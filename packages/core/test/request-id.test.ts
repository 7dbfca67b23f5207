import { describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';
import { requestIdOf } from '../src/request-context.js';

const ID = /^[A-Za-z0-9_-]{22}$/;

/** The 128 bits a new id carries (22 base64url characters: 132 bits, of which the last 4 are zero padding). */
function bitsOf(id: string): number[] {
  const bytes = Buffer.from(id, 'base64url');
  expect(bytes).toHaveLength(16);
  return Array.from({ length: 128 }, (_, i) => (bytes[i >> 3]! >> (7 - (i & 7))) & 1);
}

describe('request ids (issue 37 item 4)', () => {
  it('gives a request without X-Request-Id a random id of 22 base64url characters, not a prefix and a counter', async () => {
    const service = createGenerationService({ providers: [] });
    const ids: string[] = [];
    for (let i = 0; i < 1_000; i++) {
      const res = await service.handle({ method: 'GET', path: '/v1/models', headers: {} });
      ids.push(String(res.headers['x-request-id']));
    }
    for (const id of ids) expect(id).toMatch(ID);
    expect(new Set(ids).size).toBe(ids.length);
    // No shared part: a per-process prefix (the old ids' first 12 characters) or a shared tail would repeat.
    expect(new Set(ids.map((id) => id.slice(0, 11))).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(11))).size).toBe(ids.length);
    // Every one of the 128 bits is set in about half of the ids: a counter's high bits (or a fixed prefix) never
    // change, its low bits alternate. Binomial(1000, 0.5) is outside 400..600 with probability about 1e-10 per bit.
    const ones = new Array<number>(128).fill(0);
    for (const id of ids) bitsOf(id).forEach((bit, i) => (ones[i]! += bit));
    for (const count of ones) {
      expect(count).toBeGreaterThan(400);
      expect(count).toBeLessThan(600);
    }
    // Consecutive ids are not ordered like a counter's: about half go down.
    const downs = ids.slice(1).filter((id, i) => id < ids[i]!).length;
    expect(downs).toBeGreaterThan(400);
    expect(downs).toBeLessThan(600);
  });

  it('stays random and unique across many refills of its pool of random bytes', () => {
    const ids = Array.from({ length: 50_000 }, () => requestIdOf(undefined));
    for (const id of ids) expect(id).toMatch(ID);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("keeps the client's acceptable id and replaces an unacceptable one", () => {
    expect(requestIdOf('trace-1234:abc')).toBe('trace-1234:abc');
    expect(requestIdOf(['first-id', 'second'])).toBe('first-id');
    for (const bad of ['', 'has space', 'x'.repeat(129), 'new\nline', 'é']) expect(requestIdOf(bad)).toMatch(ID);
  });
});
