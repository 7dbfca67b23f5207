/** How a request is known under its Idempotency-Key: the hash of its canonical JSON. */
import { createHash } from 'node:crypto';

/** Canonical JSON (sorted keys) so that the same body always hashes the same for Idempotency-Key checks. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The hash a request is known by under its key: hex SHA-256 of its canonical JSON. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(canonical(request)).digest('hex');
}
