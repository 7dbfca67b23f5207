import { describe, expect, it } from 'vitest';
import type { ApiKeyStore, NewApiKey } from '@genservice/core/ports';
import { settleAll } from './harness.js';
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
      expect(await keys().resolve(key)).toMatchObject({ userId: user });
      expect(await keys().resolve(newKey())).toBeNull();
    });

    it('keeps users apart, including one user with several keys', async () => {
      const alice = uid('alice');
      const bob = uid('bob');
      const [a1, a2, b1] = [newKey(), newKey(), newKey()];
      await keys().addKey(a1, alice);
      await keys().addKey(a2, alice);
      await keys().addKey(b1, bob);
      expect(await keys().resolve(a1)).toMatchObject({ userId: alice });
      expect(await keys().resolve(a2)).toMatchObject({ userId: alice });
      expect(await keys().resolve(b1)).toMatchObject({ userId: bob });
      await keys().revokeKey(a1);
      expect(await keys().resolve(a1)).toBeNull();
      expect(await keys().resolve(a2)).toMatchObject({ userId: alice });
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
      expect(await keys().resolve(long)).toMatchObject({ userId: user });
      expect(await keys().resolve(`${long}x`)).toBeNull();
      expect(await keys().resolve(long.slice(0, -1))).toBeNull();
      expect(await keys().resolve(unicode)).toMatchObject({ userId: user });
      expect(await keys().resolve('x'.repeat(1_000_000))).toBeNull();
    });

    it('fails a revoked key on its very next use, and revoking an unknown key is a no-op', async () => {
      const key = newKey();
      const user = uid('user');
      await keys().addKey(key, user);
      expect(await keys().resolve(key)).toMatchObject({ userId: user });
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
      expect(await keys().resolve(key)).toMatchObject({ userId: user });
      await keys().revokeKey(key);
      expect(await keys().resolve(key)).toBeNull();
    });

    it('never brings a revoked key back: adding it again leaves it revoked, by key or by id (issue 37)', async () => {
      // What a host's seeding does at every start (the example hosts' USERS_FILE): a leaked key an operator revoked
      // must not come back on the next deploy.
      const key = newKey();
      const user = uid('user');
      await keys().addKey(key, user);
      await keys().revokeKey(key);
      await keys().addKey(key, user);
      await Promise.all([keys().addKey(key, user), keys().addKey(key, user)]);
      expect(await keys().resolve(key)).toBeNull();
      expect(await keys().listKeys(user)).toEqual([]);

      const byId = newKey();
      await keys().addKey(byId, user);
      const p = await keys().resolve(byId);
      expect(await keys().revokeKeyById(p!.keyId!)).toBe(true);
      await keys().addKey(byId, user);
      expect(await keys().resolve(byId)).toBeNull();
      expect(await keys().getKey(p!.keyId!)).toBeNull();
      expect(await keys().revokeKeyById(p!.keyId!)).toBe(false);
      expect(await keys().listKeys(user)).toEqual([]);
      // Nor as a managed key, nor for another user.
      await expect(keys().createKey(byId, { keyId: uid('key'), userId: user, name: 'again', scopes: ['read'], createdAt: 1 })).rejects.toThrow();
      await keys().addKey(byId, uid('mallory')).catch(() => undefined);
      expect(await keys().resolve(byId)).toBeNull();
      // Other keys of the user are untouched, and a new one works.
      const fresh = newKey();
      await keys().addKey(fresh, user);
      expect(await keys().resolve(fresh)).toMatchObject({ userId: user });
    });

    it('keeps a revoked managed key revoked: its secret and its id stay taken', async () => {
      const user = uid('user');
      const secret = newKey();
      const keyId = uid('key');
      await keys().createKey(secret, { keyId, userId: user, name: 'ci', scopes: ['read'], createdAt: 1 });
      expect(await keys().revokeKeyById(keyId)).toBe(true);
      await keys().addKey(secret, user);
      expect(await keys().resolve(secret)).toBeNull();
      await expect(keys().createKey(secret, { keyId: uid('key'), userId: user, name: 'ci', scopes: ['read'], createdAt: 2 })).rejects.toThrow();
      await expect(keys().createKey(newKey(), { keyId, userId: user, name: 'ci', scopes: ['read'], createdAt: 2 })).rejects.toThrow();
      expect(await keys().resolve(secret)).toBeNull();
      expect(await keys().getKey(keyId)).toBeNull();
    });

    it('never silently moves a key to another user', async () => {
      const key = newKey();
      const alice = uid('alice');
      await keys().addKey(key, alice);
      await keys().addKey(key, uid('mallory')).catch(() => undefined);
      expect(await keys().resolve(key)).toMatchObject({ userId: alice });
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

    describe('keys as objects', () => {
      const T = 1_790_000_000_000;
      const spec = (userId: string, extra: Partial<NewApiKey> = {}): NewApiKey => ({
        keyId: uid('key'),
        userId,
        name: 'ci',
        scopes: ['read'],
        createdAt: T,
        ...extra,
      });

      it('resolves a created key to its principal with scopes, allow-list and budget', async () => {
        const user = uid('user');
        const secret = newKey();
        const key = spec(user, { scopes: ['generate', 'read'], models: ['a', 'b'], budget: { amount: 10, period: 'day' }, maxInFlight: 4 });
        await keys().createKey(secret, key);
        expect(await keys().resolve(secret, T)).toEqual({
          userId: user,
          keyId: key.keyId,
          scopes: ['generate', 'read'],
          models: ['a', 'b'],
          budget: { amount: 10, period: 'day' },
          maxInFlight: 4,
        });
        expect((await keys().getKey(key.keyId))?.maxInFlight).toBe(4);
        const plain = spec(user);
        const plainSecret = newKey();
        await keys().createKey(plainSecret, plain);
        expect(await keys().resolve(plainSecret, T)).toEqual({ userId: user, keyId: plain.keyId, scopes: ['read'] });
        // Its expiry too: a cache of resolved keys (`apiKeyCache`) trusts a key no longer than that.
        const expiring = spec(user, { expiresAt: T + 5_000 });
        const expiringSecret = newKey();
        await keys().createKey(expiringSecret, expiring);
        expect(await keys().resolve(expiringSecret, T)).toEqual({ userId: user, keyId: expiring.keyId, scopes: ['read'], expiresAt: T + 5_000 });
      });

      it('lists a user\'s keys oldest first without secret or digest, and finds one by id', async () => {
        const user = uid('user');
        const first = spec(user, { name: 'first', expiresAt: T + 1_000 });
        const second = spec(user, { name: 'second', createdAt: T + 1, models: ['m'], budget: { amount: 2.5, period: 'month' } });
        const s1 = newKey();
        await keys().createKey(s1, first);
        await keys().createKey(newKey(), second);
        await keys().createKey(newKey(), spec(uid('other')));
        const listed = await keys().listKeys(user);
        expect(listed).toEqual([first, second]);
        expect(JSON.stringify(listed)).not.toContain(s1);
        expect(await keys().getKey(second.keyId)).toEqual(second);
        expect(await keys().getKey(uid('key'))).toBeNull();
        expect(await keys().listKeys(uid('nobody'))).toEqual([]);
      });

      it('records when a key was last used, at most about once a minute', async () => {
        const user = uid('user');
        const secret = newKey();
        const key = spec(user);
        await keys().createKey(secret, key);
        expect((await keys().getKey(key.keyId))?.lastUsedAt).toBeUndefined();
        await keys().resolve(secret, T + 1_000);
        expect((await keys().getKey(key.keyId))?.lastUsedAt).toBe(T + 1_000);
        await keys().resolve(secret, T + 2_000);
        expect((await keys().getKey(key.keyId))?.lastUsedAt).toBe(T + 1_000);
        await keys().resolve(secret, T + 61_000);
        expect((await keys().getKey(key.keyId))?.lastUsedAt).toBe(T + 61_000);
      });

      it('fails an expired key as if it were revoked', async () => {
        const secret = newKey();
        const key = spec(uid('user'), { expiresAt: T + 1_000 });
        await keys().createKey(secret, key);
        expect(await keys().resolve(secret, T + 999)).not.toBeNull();
        expect(await keys().resolve(secret, T + 1_000)).toBeNull();
        expect(await keys().resolve(secret, T + 5_000)).toBeNull();
      });

      it('revokes by id: the next resolve is null, the list forgets it, and an unknown id answers false', async () => {
        const user = uid('user');
        const secret = newKey();
        const key = spec(user);
        await keys().createKey(secret, key);
        expect(await keys().revokeKeyById(key.keyId)).toBe(true);
        expect(await keys().resolve(secret, T)).toBeNull();
        expect(await keys().listKeys(user)).toEqual([]);
        expect(await keys().getKey(key.keyId)).toBeNull();
        expect(await keys().revokeKeyById(key.keyId)).toBe(false);
        expect(await keys().revokeKeyById(uid('key'))).toBe(false);
      });

      it('refuses a key or id already stored, storing nothing, also under 20 racing creates', async () => {
        const user = uid('user');
        const secret = newKey();
        const key = spec(user);
        await keys().createKey(secret, key);
        await expect(keys().createKey(secret, spec(uid('mallory')))).rejects.toThrow();
        await expect(keys().createKey(newKey(), { ...spec(user), keyId: key.keyId })).rejects.toThrow();
        expect(await keys().resolve(secret, T)).toMatchObject({ userId: user, keyId: key.keyId });
        expect(await keys().listKeys(user)).toHaveLength(1);

        const raced = newKey();
        const results = await settleAll(Array.from({ length: 20 }, (_, i) => keys().createKey(raced, spec(uid(`u${i}`)))));
        expect(results.filter((r) => r.ok)).toHaveLength(1);
        expect(await keys().resolve(raced, T)).not.toBeNull();
      });

      it('gives a key added by the host\'s code an id and every scope', async () => {
        const user = uid('user');
        const secret = newKey();
        await keys().addKey(secret, user);
        const p = await keys().resolve(secret, T);
        expect(p).toMatchObject({ userId: user, scopes: ['generate', 'read'] });
        expect(typeof p?.keyId).toBe('string');
        const [listed] = await keys().listKeys(user);
        expect(listed?.keyId).toBe(p?.keyId);
        expect(await keys().revokeKeyById(p!.keyId!)).toBe(true);
        expect(await keys().resolve(secret, T)).toBeNull();
      });
    });
  });
}
