import { UnavailableError } from '@genservice/core/ports';
import type { SqliteDatabase } from './database.js';

/** How long each database's operations wait for another connection's lock (set by openSqliteDatabase). */
const LOCK_WAIT = new WeakMap<SqliteDatabase, number>();

/** The default wait for a lock held by another connection before an operation fails with UnavailableError (503). */
export const DEFAULT_LOCK_WAIT_MS = 2000;

export function setLockWait(db: SqliteDatabase, ms: number): void {
  LOCK_WAIT.set(db, ms);
}

export function isBusy(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` (synchronous SQLite work: one statement or one transaction) and, while another connection holds
 * the lock it needs, runs it again after short timers instead of blocking the event loop in SQLite's busy handler.
 * Past the database's lock wait it throws UnavailableError: the API answers 503 with Retry-After, and every other
 * request of every user keeps being served meanwhile.
 */
export async function retryWhileBusy<T>(db: SqliteDatabase, attempt: () => T | Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (error) {
    if (!isBusy(error)) throw error;
  }
  return retryAfterBusy(db, attempt);
}

/** The waiting part of retryWhileBusy, once a first attempt found the lock taken. */
async function retryAfterBusy<T>(db: SqliteDatabase, attempt: () => T | Promise<T>): Promise<T> {
  const deadline = Date.now() + (LOCK_WAIT.get(db) ?? DEFAULT_LOCK_WAIT_MS);
  let delay = 2;
  for (;;) {
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 50);
    try {
      return await attempt();
    } catch (error) {
      if (!isBusy(error)) throw error;
      if (Date.now() >= deadline) {
        throw new UnavailableError('The SQLite database stayed locked by another connection', { cause: error });
      }
    }
  }
}

/**
 * Makes every async method of a store instance retry while the database is busy (see retryWhileBusy). Each such
 * method is one statement or one transaction, or idempotent statements, so running it again after SQLITE_BUSY is
 * safe: a busy statement or transaction changed nothing.
 */
export function retryMethodsWhileBusy(instance: object, db: SqliteDatabase): void {
  const proto = Object.getPrototypeOf(instance) as Record<string, unknown>;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const fn = proto[name];
    if (name === 'constructor' || typeof fn !== 'function' || fn.constructor.name !== 'AsyncFunction') continue;
    const method = fn as (...args: unknown[]) => Promise<unknown>;
    // The first attempt is the method itself (no extra async frame on every store call); only a busy one waits.
    Object.defineProperty(instance, name, {
      value: (...args: unknown[]) =>
        method.apply(instance, args).catch((error: unknown) => {
          if (!isBusy(error)) throw error;
          return retryAfterBusy(db, () => method.apply(instance, args));
        }),
      configurable: true,
      writable: true,
    });
  }
}
