import { expect } from 'vitest';
import type { Reply } from './http.js';

const JSON_TYPE = /^application\/json\b/i;

/** Asserts the decided error shape: `{"error":{"code","message","details"?}}`, JSON, and nothing else. */
export function expectError(reply: Reply, status: number, code: string): void {
  const where = `${reply.status} ${reply.text.slice(0, 300)}`;
  expect(reply.status, where).toBe(status);
  expect(reply.contentType, where).toMatch(JSON_TYPE);
  expect(reply.body, where).toBeTypeOf('object');
  expect(Object.keys(reply.body), where).toEqual(['error']);
  const error = reply.body.error;
  expect(error.code, where).toBe(code);
  expect(typeof error.message, where).toBe('string');
  expect(error.message.length, where).toBeGreaterThan(0);
  for (const k of Object.keys(error)) expect(['code', 'message', 'details'], where).toContain(k);
  if ('details' in error) {
    expect(Array.isArray(error.details), where).toBe(true);
    for (const d of error.details) {
      expect(typeof d.field, where).toBe('string');
      expect(typeof d.code, where).toBe('string');
      expect(typeof d.message, where).toBe('string');
    }
  }
}

