import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { Document, NodeIO } from '@gltf-transform/core';
import { decode as fastPngDecode, encode as fastPngEncode } from 'fast-png';
import { describe, expect, it } from 'vitest';
import { encodeGlb } from '../src/formats/glb.js';
import { encodeIdrFrame, escapeRbsp, h264Headers } from '../src/formats/h264.js';
import { muxMp4 } from '../src/formats/mp4.js';
import { decodePng, encodePng, PngDecodeError, type RgbaImage } from '../src/formats/png.js';
import { encodeWav } from '../src/formats/wav.js';
import { crc32 } from '../src/util/crc32.js';
import { checkGlb, checkWav, decodeIPcmSlice, mp4Nals, parseSps } from './structure.js';
import { checkMp4, checkPng } from './validate.js';

function noise(width: number, height: number, seed: number, opaque = false): RgbaImage {
  const data = new Uint8Array(width * height * 4);
  let s = seed;
  for (let i = 0; i < data.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    data[i] = opaque && i % 4 === 3 ? 255 : s >>> 24;
  }
  return { width, height, data };
}

function pngChunk(type: string, body: Uint8Array): Uint8Array {
  const out = Buffer.alloc(12 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.write(type, 4, 'latin1');
  out.set(body, 8);
  out.writeUInt32BE(crc32(out, 4, 8 + body.length), 8 + body.length);
  return out;
}

/** A hand-made PNG with the given header fields and raw (filter-prefixed) scanlines. */
function handMadePng(width: number, height: number, depth: number, colorType: number, raw: number[], extra: Uint8Array[] = []): Uint8Array {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = depth;
  ihdr[9] = colorType;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    ...extra,
    pngChunk('IDAT', deflateSync(Buffer.from(raw))),
    pngChunk('IEND', new Uint8Array(0)),
  ]);
}

describe('PNG', () => {
  it('round-trips RGBA and RGB rasters through its own decoder, with valid chunk CRCs', () => {
    for (const [w, h] of [[1, 1], [7, 3], [64, 33]]) {
      const rgba = noise(w, h, w * 31 + h);
      const encoded = encodePng(rgba);
      expect(checkPng(encoded)).toEqual({ width: w, height: h });
      expect(decodePng(encoded)).toEqual(rgba);
      const opaque = noise(w, h, w + h, true);
      const rgb = encodePng(opaque, { alpha: false });
      expect(rgb[25]).toBe(2); // colour type RGB in IHDR
      expect(decodePng(rgb)).toEqual(opaque);
    }
  });

  it('decodes palette, 1-bit grey and grey+alpha images', () => {
    const palette = handMadePng(3, 1, 8, 3, [0, 0, 1, 2], [pngChunk('PLTE', Uint8Array.from([255, 0, 0, 0, 255, 0, 0, 0, 255])), pngChunk('tRNS', Uint8Array.of(128))]);
    expect([...decodePng(palette).data]).toEqual([255, 0, 0, 128, 0, 255, 0, 255, 0, 0, 255, 255]);
    const bits = handMadePng(3, 1, 1, 0, [0, 0b1010_0000]);
    expect([...decodePng(bits).data]).toEqual([255, 255, 255, 255, 0, 0, 0, 255, 255, 255, 255, 255]);
    const greyAlpha = handMadePng(1, 2, 8, 4, [0, 10, 20, 2, 5, 5]);
    expect([...decodePng(greyAlpha).data]).toEqual([10, 10, 10, 20, 15, 15, 15, 25]);
  });

  it('refuses corrupt, interlaced and oversized inputs with PngDecodeError', () => {
    const good = encodePng(noise(4, 4, 1));
    const corrupt = good.slice();
    corrupt[40] ^= 0xff;
    expect(() => decodePng(corrupt)).toThrow(PngDecodeError);
    expect(() => decodePng(new Uint8Array([1, 2, 3]))).toThrow(PngDecodeError);
    const interlaced = handMadePng(1, 1, 8, 0, [0, 0]);
    interlaced[28] = 1;
    interlaced.set(Buffer.from(pngChunk('IHDR', interlaced.subarray(16, 29)).subarray(21, 25)), 29);
    expect(() => decodePng(interlaced)).toThrow(/interlaced/);
    // A 100000 x 100000 header over a few bytes of data is a decompression bomb; it is refused before inflating.
    const bomb = handMadePng(100_000, 100_000, 8, 6, [0]);
    expect(() => decodePng(bomb)).toThrow(/too large/);
  });
});

describe('H.264 (I_PCM) and MP4', () => {
  it('escapes every start-code prefix', () => {
    const escaped = escapeRbsp(Uint8Array.from([0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4]));
    for (let i = 0; i + 2 < escaped.length; i++) {
      expect(escaped[i] === 0 && escaped[i + 1] === 0 && escaped[i + 2] <= 3 && escaped[i + 2] !== 3).toBe(false);
    }
    expect([...escaped]).toEqual([0, 0, 3, 0, 0, 3, 0, 1, 0, 0, 3, 2, 0, 0, 3, 3, 0, 0, 4]);
  });

  it('writes a cropped SPS and PCM samples that decode back to BT.601 values', () => {
    // 40x30 is not a multiple of 16: the stream is 48x32 with the rest cropped.
    const image: RgbaImage = { width: 40, height: 30, data: new Uint8Array(40 * 30 * 4) };
    for (let i = 0; i < 40 * 30; i++) image.data.set(i % 40 < 20 ? [255, 0, 0, 255] : [0, 0, 255, 255], i * 4);
    const stream = h264Headers(40, 30, 12);
    const sps = parseSps(stream.sps);
    expect(sps).toMatchObject({ width: 40, height: 30, mbWidth: 3, mbHeight: 2, profile: 66 });
    const { y, u, v } = decodeIPcmSlice(encodeIdrFrame(image, 0), 3, 2);
    expect(y[0]).toBe(((66 * 255 + 128) >> 8) + 16); // red: Y 82
    expect(y[39]).toBe(((25 * 255 + 128) >> 8) + 16); // blue: Y 41
    expect(u[0]).toBe(Math.round((-38 * 255) / 256) + 128);
    expect(v[0]).toBe(Math.round((112 * 255) / 256) + 128);
    // Padding repeats the edge pixels.
    expect(y[47]).toBe(y[39]);
    expect(y[31 * 48]).toBe(y[0]);
  });

  it('muxes a frame per sample with a sample table matching the mdat', () => {
    const frames = [0, 1, 2].map((i) => encodeIdrFrame(noise(32, 16, i, true), i % 2));
    const mp4 = muxMp4({ width: 32, height: 16, fps: 10, stream: h264Headers(32, 16, 10), frames });
    expect(checkMp4(mp4)).toEqual({ samples: 3, width: 32, height: 16 });
    const nals = mp4Nals(mp4);
    expect(nals.samples.map((s) => [...s])).toEqual(frames.map((f) => [...f]));
  });
});

describe('WAV and GLB', () => {
  it('writes a canonical 16-bit PCM WAV', () => {
    const samples = Int16Array.from([0, 1000, -1000, 32767, -32768]);
    const wav = checkWav(encodeWav(samples, 8000));
    expect(wav).toMatchObject({ sampleRate: 8000, channels: 1, bits: 16 });
    expect([...wav.samples]).toEqual([...samples]);
  });

  it('writes a GLB whose chunks, views and accessors line up', () => {
    // One triangle with an odd byte count of indices, so the padding paths run.
    const glb = encodeGlb(
      {
        positions: Float32Array.from([0, 0, 0, 1, 0, 0, 0, 1, 0.5]),
        normals: Float32Array.from([0, 0, 1, 0, 0, 1, 0, 0, 1]),
        colors: Float32Array.from([1, 0, 0, 0, 1, 0, 0, 0, 1]),
        indices: Uint16Array.from([0, 1, 2]),
      },
      { name: 'm', baseColor: [1, 1, 1, 1], metallic: 0, roughness: 1 },
      'triangle ünïcode',
    );
    const { json, vertices, triangles } = checkGlb(glb);
    expect({ vertices, triangles }).toEqual({ vertices: 3, triangles: 1 });
    expect(json.accessors[0].max).toEqual([1, 1, 0.5]);
  });
});

// Maintained readers and writers as oracles: the demo formats are written by hand (small, and the PNG decoder caps
// what it inflates at the size its header announces), so each one is checked against a library that users trust.
describe('against maintained libraries', () => {
  it('@gltf-transform/core reads our GLB: one mesh, its material, attributes and indices', async () => {
    const glb = encodeGlb(
      {
        positions: Float32Array.from([0, 0, 0, 1, 0, 0, 0, 1, 0.5, 1, 1, 0]),
        normals: Float32Array.from([0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1]),
        colors: Float32Array.from([1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1]),
        indices: Uint16Array.from([0, 1, 2, 1, 3, 2]),
      },
      { name: 'clay', baseColor: [0.5, 0.25, 1, 1], metallic: 0.1, roughness: 0.9 },
      'quad',
    );
    const doc: Document = await new NodeIO().readBinary(glb);
    const meshes = doc.getRoot().listMeshes();
    expect(meshes.map((m) => m.getName())).toEqual(['quad']);
    const prim = meshes[0]!.listPrimitives()[0]!;
    expect(Array.from(prim.getAttribute('POSITION')!.getArray()!)).toEqual([0, 0, 0, 1, 0, 0, 0, 1, 0.5, 1, 1, 0]);
    expect(prim.getAttribute('NORMAL')!.getCount()).toBe(4);
    expect(prim.getAttribute('COLOR_0')!.getCount()).toBe(4);
    expect(Array.from(prim.getIndices()!.getArray()!)).toEqual([0, 1, 2, 1, 3, 2]);
    const material = prim.getMaterial()!;
    expect(material.getName()).toBe('clay');
    expect(material.getBaseColorFactor()).toEqual([0.5, 0.25, 1, 1]);
    expect(material.getRoughnessFactor()).toBeCloseTo(0.9);
  });

  it('fast-png decodes what encodePng writes, and decodePng reads what fast-png writes, pixel for pixel', () => {
    const image = noise(37, 23, 5, true);
    const rgba = { width: image.width, height: image.height, data: image.data };
    const withAlpha = fastPngDecode(encodePng(rgba, { alpha: true }));
    expect({ width: withAlpha.width, height: withAlpha.height, channels: withAlpha.channels, depth: withAlpha.depth }).toEqual({ width: 37, height: 23, channels: 4, depth: 8 });
    expect(Buffer.from(withAlpha.data as Uint8Array).equals(Buffer.from(rgba.data))).toBe(true);
    const back = decodePng(fastPngEncode({ width: 37, height: 23, data: rgba.data, channels: 4, depth: 8 }));
    expect(Buffer.from(back.data).equals(Buffer.from(rgba.data))).toBe(true);
    // RGB, 16 bits per channel: our decoder keeps the high byte and makes the pixels opaque.
    const rgb16 = Uint16Array.from({ length: 4 * 3 * 3 }, (_, i) => (i * 4099) & 0xffff);
    const wide = decodePng(fastPngEncode({ width: 4, height: 3, data: rgb16, channels: 3, depth: 16 }));
    expect(Array.from(wide.data.slice(0, 8))).toEqual([rgb16[0]! >> 8, rgb16[1]! >> 8, rgb16[2]! >> 8, 255, rgb16[3]! >> 8, rgb16[4]! >> 8, rgb16[5]! >> 8, 255]);
  });
});

const ffprobe = spawnSync('ffprobe', ['-version']).status === 0;

describe.skipIf(!ffprobe)('a real decoder (ffmpeg, when installed)', () => {
  it('decodes the MP4 without errors and reports the expected stream', () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-models-'));
    try {
      const frames = Array.from({ length: 6 }, (_, i) => encodeIdrFrame(noise(160, 120, i, true), i % 2));
      const file = join(dir, 'clip.mp4');
      writeFileSync(file, muxMp4({ width: 160, height: 120, fps: 12, stream: h264Headers(160, 120, 12), frames }));
      const probe = execFileSync('ffprobe', ['-v', 'error', '-count_frames', '-show_entries', 'stream=codec_name,profile,width,height,nb_read_frames', '-of', 'json', file]);
      expect(JSON.parse(probe.toString()).streams[0]).toMatchObject({ codec_name: 'h264', profile: 'Constrained Baseline', width: 160, height: 120, nb_read_frames: '6' });
      const decode = spawnSync('ffmpeg', ['-v', 'error', '-xerror', '-i', file, '-f', 'null', '-']);
      expect(decode.status, decode.stderr.toString()).toBe(0);
      expect(decode.stderr.toString()).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
