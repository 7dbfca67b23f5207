// `pnpm bench` (the README's benchmark command) runs TypeScript through tsx, which strips types without checking
// them: a change to a package that breaks a bench script (a renamed option, a field a bench subclass shadows) would
// only show when someone runs the benchmarks. This typechecks bench/ against the packages' sources, as
// `cd bench && npx tsc -p tsconfig.json` does.
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const bench = fileURLToPath(new URL('../../../bench/', import.meta.url));

describe('bench/', () => {
  it('typechecks against the packages as they are now (bench/tsconfig.json)', () => {
    const file = ts.findConfigFile(bench, ts.sys.fileExists, 'tsconfig.json');
    expect(file).toBeDefined();
    const read = ts.readConfigFile(file!, ts.sys.readFile);
    const config = ts.parseJsonConfigFileContent(read.config, ts.sys, bench);
    const program = ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, noEmit: true } });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(bench, 'bench/')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(config.fileNames.some((f) => f.endsWith('bench/run.ts'))).toBe(true);
    expect(errors).toEqual([]);
  }, 300_000);
});
