import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The database tests connect to in order to create their own: `DATABASE_URL` when set, else the local server
 * (libpq `PG*` variables still override host, port and user).
 */
export function adminUrl(): string {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const host = process.env.PGHOST ?? '127.0.0.1';
  const port = process.env.PGPORT ?? '5432';
  const user = process.env.PGUSER ?? 'postgres';
  const database = process.env.PGDATABASE ?? 'test';
  return `postgres://${encodeURIComponent(user)}@${host}:${port}/${database}`;
}

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A database of its own for one test file, dropped (even with connections left open) afterwards. */
export async function createTestDatabase(prefix = 'genservice_test'): Promise<TestDatabase> {
  const name = randomName(prefix);
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop(): Promise<void> {
      const client = new pg.Client({ connectionString: adminUrl() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
