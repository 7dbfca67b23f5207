import { defineConfig } from 'tsup';

const entry = ['src/index.ts', 'src/ports.ts', 'src/adapter.ts'];

// Core has no ESM-only dependency (the in-process queue counts its own slots), so `require('@genservice/core')` works on
// every Node 20; scripts/check-packages.mjs runs the CommonJS entry with `--no-experimental-require-module` to keep it so.
// `pnpm build` empties dist/ first (the two builds run at once, so neither may clean).
export default defineConfig([
  { entry, format: 'esm', dts: true, target: 'node20' },
  { entry, format: 'cjs', dts: true, target: 'node20' },
]);
