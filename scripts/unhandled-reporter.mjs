// A vitest reporter that writes the run's unhandled errors (which fail a run whose tests all passed) to a JSON file,
// so scripts/test.mjs can repeat them, one line each, next to the count line a CI log is read by.
import { writeFileSync } from 'node:fs';

export default class UnhandledReporter {
  onTestRunEnd(_modules, unhandledErrors) {
    const out = process.env.GENSERVICE_UNHANDLED_OUT;
    if (!out) return;
    const errors = [...(unhandledErrors ?? [])].map((e) => ({
      name: e?.name ?? 'Error',
      message: String(e?.message ?? e).slice(0, 500),
      file: e?.VITEST_TEST_PATH ?? e?.testPath ?? undefined,
      test: e?.VITEST_TEST_NAME ?? undefined,
      stack: String(e?.stack ?? '').split('\n').slice(0, 6).join(' | ').slice(0, 800),
    }));
    writeFileSync(out, JSON.stringify(errors));
  }
}
