/**
 * The HTTP conformance suite every framework adapter runs: the contract of
 * `spec/generation-service-interface.md` and the decisions of DESIGN.md section 4, checked against a real
 * listening server with real `fetch`.
 *
 * @example
 * ```ts
 * // packages/express/test/conformance.test.ts
 * import express from 'express';
 * import { listen, runConformanceSuite } from '@genservice/testing';
 * import { genserviceRouter } from '../src/index.js';
 *
 * runConformanceSuite('express', async (service, { prefix, hostParsers }) => {
 *   const app = express();
 *   if (hostParsers) app.use(express.json());
 *   app.use(prefix || '/', genserviceRouter(service));
 *   return listen(app, prefix);
 * });
 * ```
 */
import { describe } from 'vitest';
import { defineModeTests } from './suite.js';
import { defineOpenAiTests } from './openai.js';
import type { MountFn, MountOptions } from './types.js';

export type { MountFn, MountOptions, MountedServer } from './types.js';
export { call, chunkedBody, disconnectMidBody, listen, type CallOptions, type Reply } from './http.js';
export { conformanceModels, createFixture, IMAGE_BYTES, VIDEO_BYTES, type Fixture, type FixtureOptions, type User } from './fixture.js';
export { expectError } from './expect-error.js';
export { createRecordingService, type EchoedRequest, type RecordingService } from './recording.js';
export { loadBuiltPackage, type BuiltPackageExports, type BuiltPackageOptions } from './built-package.js';

export interface ConformanceOptions {
  /**
   * The mounts to run the suite in. Default: at the root without host body parsers, and under `/api` with them.
   * The slow cases (500 generations) run in the first mode only.
   */
  modes?: MountOptions[];
}

export const DEFAULT_MODES: readonly MountOptions[] = [
  { prefix: '', hostParsers: false },
  { prefix: '/api', hostParsers: true },
];

/** Defines the whole conformance suite (as vitest `describe` blocks) for one adapter. */
export function runConformanceSuite(name: string, mount: MountFn, options: ConformanceOptions = {}): void {
  const modes = options.modes ?? DEFAULT_MODES;
  describe(`${name}: HTTP conformance`, () => {
    modes.forEach((mode, i) => {
      const label = `${mode.prefix ? `under ${mode.prefix}` : 'at the root'}, ${mode.hostParsers ? 'with' : 'without'} host body parsers`;
      describe(label, () => {
        defineModeTests(mount, mode, { heavy: i === 0 });
        defineOpenAiTests(mount, mode);
      });
    });
  });
}
