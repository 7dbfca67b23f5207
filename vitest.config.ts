import { defineConfig } from 'vitest/config';
import { existsSync } from 'node:fs';
import projects from './vitest.workspace.ts';

// Only the projects whose folder exists yet, so a half-built tree still runs.
export default defineConfig({
  test: {
    projects: projects.filter((p) => existsSync(p.test.root as string)),
  },
});
