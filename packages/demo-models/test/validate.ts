import { expect } from 'vitest';
import { crc32 } from '../src/util/crc32.js';

/** Checks the PNG signature, every chunk CRC, IHDR first and IEND last; returns the IHDR size. */
export function checkPng(bytes: Uint8Array): { width: number; height: number } {
  expect([...bytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const types: string[] = [];
  let offset = 8;
  let width = 0;
  let height = 0;
  while (offset < bytes.length) {
    const length = view.getUint32(offset);
    const type = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
    expect(offset + 12 + length).toBeLessThanOrEqual(bytes.length);
    expect(view.getUint32(offset + 8 + length)).toBe(crc32(bytes, offset + 4, offset + 8 + length));
    if (type === 'IHDR') {
      expect(length).toBe(13);
      width = view.getUint32(offset + 8);
      height = view.getUint32(offset + 12);
    }
    types.push(type);
    offset += 12 + length;
  }
  expect(offset).toBe(bytes.length);
  expect(types[0]).toBe('IHDR');
  expect(types.at(-1)).toBe('IEND');
  expect(types).toContain('IDAT');
  return { width, height };
}

interface Box {
  type: string;
  start: number;
  size: number;
  children?: Box[];
}

const CONTAINERS = new Set(['moov', 'trak', 'mdia', 'minf', 'stbl', 'dinf']);

function parseBoxes(bytes: Uint8Array, start: number, end: number): Box[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const boxes: Box[] = [];
  let offset = start;
  while (offset < end) {
    const size = view.getUint32(offset);
    const type = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
    expect(size).toBeGreaterThanOrEqual(8);
    expect(offset + size).toBeLessThanOrEqual(end);
    const box: Box = { type, start: offset, size };
    if (CONTAINERS.has(type)) box.children = parseBoxes(bytes, offset + 8, offset + size);
    boxes.push(box);
    offset += size;
  }
  expect(offset).toBe(end);
  return boxes;
}

function find(boxes: Box[], path: string[]): Box {
  let level = boxes;
  let found: Box | undefined;
  for (const type of path) {
    found = level.find((b) => b.type === type);
    if (!found) throw new Error(`missing box ${path.join('/')}`);
    level = found.children ?? [];
  }
  return found as Box;
}

/** Walks the MP4 box tree (ftyp, moov, mdat) and checks the sample table against the mdat; returns the sample count. */
export function checkMp4(bytes: Uint8Array): { samples: number; width: number; height: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const top = parseBoxes(bytes, 0, bytes.length);
  expect(top.map((b) => b.type)).toEqual(['ftyp', 'moov', 'mdat']);
  const stbl = ['moov', 'trak', 'mdia', 'minf', 'stbl'];
  const stsz = find(top, [...stbl, 'stsz']);
  const samples = view.getUint32(stsz.start + 16);
  let total = 0;
  for (let i = 0; i < samples; i++) total += view.getUint32(stsz.start + 20 + i * 4);
  const stco = find(top, [...stbl, 'stco']);
  const mdat = find(top, ['mdat']);
  expect(view.getUint32(stco.start + 16)).toBe(mdat.start + 8);
  expect(total).toBe(mdat.size - 8);
  const stts = find(top, [...stbl, 'stts']);
  expect(view.getUint32(stts.start + 16)).toBe(samples);
  // Every sample is one length-prefixed IDR slice NAL (type 5).
  let offset = mdat.start + 8;
  for (let i = 0; i < samples; i++) {
    const length = view.getUint32(offset);
    expect(bytes[offset + 4] & 0x1f).toBe(5);
    offset += 4 + length;
  }
  expect(offset).toBe(bytes.length);
  const tkhd = find(top, ['moov', 'trak', 'tkhd']);
  return { samples, width: view.getUint32(tkhd.start + 84) / 65536, height: view.getUint32(tkhd.start + 88) / 65536 };
}
