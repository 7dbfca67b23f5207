import { describe, expect, it } from 'vitest';
import type { ApiKeyStore } from '@genservice/core/ports';
import { holdsString, uid, useFresh } from './harness.js';

/** The ApiKeyStore half of `runPortContracts`. */
export function describeApiKeyContract(make: () => Promise<{ apiKeys: ApiKeyStore; close(): Promise<void> }>): void {
  describe('ApiKeyStore', () => {
    const ports = useFresh(make);
    const keys = (): ApiKeyStore => ports().apiKeys;
    const newKey = (): string => `gs_test_${uid('k')}_${'Z'.repeat(16)}`;

    it('resolves an added key to its user and an unknown key to null', async () => {
      const key = newKey();
      const user = uid('user');
      expect(await keys().resolve(key)).toBeNull();
      await keys().addKey(key, user);
      expect(await keys().resolve(key)).toEqual({ userId: user });
      expect(await keys().resolve(newKey())).toBeNull();
    });

    it('keeps users apart, including one user with several keys', async () => {
      const alice = uid('alice');
      const bob = uid('bob');
      const [a1, a2, b1] = [newKey(), newKey(), newKey()];
      await keys().addKey(a1, alice);
      await keys().addKey(a2, alice);
      await keys().addKey(b1, bob);
      expect(await keys().resolve(a1)).toEqual({ userId: alice });
      expect(await keys().resolve(a2)).toEqual({ userId: alice });
      expect(await keys().resolve(b1)).toEqual({ userId: bob });
      await keys().revokeKey(a1);
      expect(await keys().resolve(a1)).toBeNull();
      expect(await keys().resolve(a2)).toEqual({ userId: alice });
    });

    it('matches only the exact key: prefixes, extensions, case and whitespace variants are unknown', async () => {
      const key = newKey();
      await keys().addKey(key, uid('user'));
      const near = [
        '',
        key.slice(0, -1),
        key.slice(0, 8),
        `${key}x`,
        `${key}\0`,
        ` ${key}`,
        `${key} `,
        `${key}\n`,
        key.toUpperCase(),
        key.toLowerCase(),
        `Bearer ${key}`,
        key.normalize('NFD') === key ? `${key.slice(0, -1)}\u0396` : key.normalize('NFD'),
      ];
      for (const candidate of near) expect(await keys().resolve(candidate)).toBeNull();
    });

    it('handles very long and non-ASCII keys', async () => {
      const long = `gs_${uid('long')}_${'x'.repeat(100_000)}`;
      const unicode = `ключ-🔑-${uid('u')}`;
      const user = uid('user');
      await keys().addKey(long, user);
      await keys().addKey(unicode, user);
      expect(await keys().resolve(long)).toEqual({ userId: user });
      expect(await keys().resolve(`${long}x`)).toBeNull();
      expect(await keys().resolve(long.slice(0, -1))).toBeNull();
      expect(await keys().resolve(unicode)).toEqual({ userId: user });
      expect(await keys().resolve('x'.repeat(1_000_000))).toBeNull();
    });

    it('fails a revoked key on its very next use, and revoking an unknown key is a no-op', async () => {
      const key = newKey();
      const user = uid('user');
      await keys().addKey(key, user);
      expect(await keys().resolve(key)).toEqual({ userId: user });
      await keys().revokeKey(key);
      expect(await keys().resolve(key)).toBeNull();
      await keys().revokeKey(key);
      await keys().revokeKey(newKey());
      await keys().revokeKey('');
      expect(await keys().resolve(key)).toBeNull();
    });

    it('fails a revoked key even if the key was added twice (adding again is a no-op, not a second copy)', async () => {
      const key = newKey();
      const user = uid('user');
      await keys().addKey(key, user);
      await keys().addKey(key, user);
      await Promise.all([keys().addKey(key, user), keys().addKey(key, user)]);
      expect(await keys().resolve(key)).toEqual({ userId: user });
      await keys().revokeKey(key);
      expect(await keys().resolve(key)).toBeNull();
    });

    it('can add a revoked key again', async () => {
      const key = newKey();
      const user = uid('user');
      await keys().addKey(key, user);
      await keys().revokeKey(key);
      await keys().addKey(key, user);
      expect(await keys().resolve(key)).toEqual({ userId: user });
    });

    it('never silently moves a key to another user', async () => {
      const key = newKey();
      const alice = uid('alice');
      await keys().addKey(key, alice);
      await keys().addKey(key, uid('mallory')).catch(() => undefined);
      expect(await keys().resolve(key)).toEqual({ userId: alice });
    });

    it('does not hold the plain key anywhere reachable from the store object', async () => {
      const key = `plain-${uid('secret')}-${'Q'.repeat(24)}`;
      await keys().addKey(key, uid('user'));
      expect(await keys().resolve(key)).not.toBeNull();
      expect(holdsString(keys(), key)).toBe(false);
      // The key's hex or base64 digest is fine; the key itself in any common encoding is not.
      expect(holdsString(keys(), Buffer.from(key).toString('base64'))).toBe(false);
      expect(holdsString(keys(), Buffer.from(key).toString('hex'))).toBe(false);
    });
  });
}
