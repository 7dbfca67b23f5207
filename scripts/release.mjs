#!/usr/bin/env node
// `node scripts/release.mjs [--dry-run] [--tag next] [--otp 123456]`: publishes every public package at the version in
// its package.json. The packages move in lockstep: bump them all first (`node scripts/release.mjs --version 0.2.0`
// writes the version into every package.json and stops, so the bump is a commit of its own).
//
// Publishing goes through `pnpm publish`, never `npm publish` in a package folder: pnpm replaces each `workspace:*`
// range with the version it points at, which npm would ship as is (and every install would fail with
// EUNSUPPORTEDPROTOCOL). Before anything is published, scripts/check-packages.mjs builds, packs and checks every
// package (publint, attw, a fresh app that installs the tarballs with npm, typechecks and runs): a failure stops here.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i === -1 ? undefined : argv[i + 1];
};
const packages = readdirSync(`${root}packages`).map((dir) => `${root}packages/${dir}/package.json`);

const version = option('--version');
if (version !== undefined) {
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) throw new Error(`not a semver version: ${version}`);
  for (const file of packages) {
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    pkg.version = version;
    writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
  }
  console.log(`every package is now ${version}; commit, then run node scripts/release.mjs`);
  process.exit(0);
}

const versions = new Set(packages.map((file) => JSON.parse(readFileSync(file, 'utf8')).version));
if (versions.size !== 1) throw new Error(`the packages must share one version, found: ${[...versions].join(', ')}`);

const check = spawnSync(process.execPath, [`${root}scripts/check-packages.mjs`], { cwd: root, stdio: 'inherit' });
if (check.status !== 0) {
  console.error('check-packages failed: nothing was published');
  process.exit(1);
}

const publish = ['-y', 'pnpm@10', '-r', '--filter', './packages/**', 'publish', '--access', 'public'];
if (argv.includes('--dry-run')) publish.push('--dry-run');
if (option('--tag')) publish.push('--tag', option('--tag'));
if (option('--otp')) publish.push('--otp', option('--otp'));
// The checked build is what gets published: no second build, and no publish from a dirty tree (pnpm's own check).
const result = spawnSync('npx', publish, { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
