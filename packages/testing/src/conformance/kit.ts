import { afterAll, beforeAll } from 'vitest';
import { createFixture, type Fixture, type FixtureOptions, type User } from './fixture.js';
import type { Reply } from './http.js';
import type { MountFn, MountOptions } from './types.js';

/** What every area of the conformance suite gets: the mode's shared fixture, and what it needs to make one of its own. */
export interface ModeContext {
  /** The fixture every test of the mode shares (each test makes its own users). */
  fx: Fixture;
  mount: MountFn;
  mode: MountOptions;
  /** Run the slow cases (500 generations): in the first mode only. */
  heavy: boolean;
}

export const JSON_TYPE = /^application\/json\b/i;

/**
 * A fixture made before the tests of the enclosing `describe` and closed after them, as a stand-in object that reads
 * the fixture of the current run: call it at the top of a `describe` and use the answer in its tests.
 */
export function useFixture(mount: MountFn, mode: MountOptions, options: FixtureOptions = {}): Fixture {
  let current: Fixture | undefined;
  beforeAll(async () => {
    current = await createFixture(mount, mode, options);
  });
  afterAll(async () => {
    const made = current;
    current = undefined;
    await made?.close();
  });
  return new Proxy({} as Fixture, {
    get(_target, prop) {
      if (!current) throw new Error(`the conformance fixture is only there inside a test (read: ${String(prop)})`);
      const value: unknown = Reflect.get(current, prop);
      return typeof value === 'function' ? value.bind(current) : value;
    },
  });
}

/** Runs `work` with the `held` model's gate, and leaves no held generation behind: `ids` are run to their end. */
export async function withHeld<T>(fx: Fixture, user: User, ids: string[], work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } finally {
    fx.gate.open();
    for (const id of ids) await fx.terminal(user, id).catch(() => undefined);
    fx.gate.close();
  }
}

/**
 * Creates a generation of the `held` model, waits until its run is at the gate (so it is `processing` and cannot
 * finish), runs `work` with its id, and then lets it finish.
 */
export async function withHeldGeneration(fx: Fixture, user: User, work: (id: string, created: Reply) => Promise<void>): Promise<void> {
  const ids: string[] = [];
  await withHeld(fx, user, ids, async () => {
    const before = fx.gate.total;
    const r = await fx.create(user, { modelId: 'held' });
    ids.push(r.body.generationId);
    await fx.gate.reached(before + 1);
    await work(r.body.generationId as string, r);
  });
}

/** Mismatches of a list of checks, so one failing case names itself instead of hiding the rest. */
export function mismatches(results: Array<{ label: string; reply: Reply; status: number; code?: string }>): string[] {
  return results
    .filter((r) => r.reply.status !== r.status || (r.code !== undefined && r.reply.body?.error?.code !== r.code) || !JSON_TYPE.test(r.reply.contentType))
    .map((r) => `${r.label}: expected ${r.status}${r.code ? ` ${r.code}` : ''}, got ${r.reply.status} ${r.reply.text.slice(0, 200)}`);
}

/** A create body of exactly `size` bytes, valid JSON for the `noop` model (core ignores unknown top-level keys). */
export function bodyOfSize(size: number): string {
  const head = '{"modelId":"noop","pad":"';
  const tail = '"}';
  return head + 'a'.repeat(size - head.length - tail.length) + tail;
}
