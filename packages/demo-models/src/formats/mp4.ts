/**
 * An ISO BMFF (MP4) writer for one H.264 video track, with `moov` before `mdat` ("fast start") so browsers can
 * begin playing before the whole file has arrived.
 */

import { concat } from './png.js';
import type { H264Stream } from './h264.js';

function u8(v: number): Uint8Array {
  return Uint8Array.of(v & 0xff);
}
function u16(v: number): Uint8Array {
  return Uint8Array.of((v >>> 8) & 0xff, v & 0xff);
}
function u32(v: number): Uint8Array {
  return Uint8Array.of((v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
}
function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}
function zeros(n: number): Uint8Array {
  return new Uint8Array(n);
}

function box(type: string, ...payload: Uint8Array[]): Uint8Array {
  const body = concat(payload);
  return concat([u32(body.length + 8), ascii(type), body]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Uint8Array[]): Uint8Array {
  return box(type, u8(version), u8(flags >>> 16), u8(flags >>> 8), u8(flags), ...payload);
}

// The identity transform, in 16.16 / 2.30 fixed point as the format stores it.
const MATRIX = concat([0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000].map(u32));

export interface Mp4VideoOptions {
  width: number;
  height: number;
  fps: number;
  stream: H264Stream;
  /** One slice NAL unit per frame, without start codes. */
  frames: Uint8Array[];
}

/** Timescale of the media track; 90 kHz divides evenly by every usual frame rate. */
const TIMESCALE = 90_000;

export function muxMp4(options: Mp4VideoOptions): Uint8Array {
  const { width, height, fps, stream, frames } = options;
  const delta = Math.round(TIMESCALE / fps);
  const mediaDuration = delta * frames.length;
  const movieTimescale = 1000;
  const movieDuration = Math.round((mediaDuration * movieTimescale) / TIMESCALE);

  // Samples are length-prefixed NAL units (lengthSizeMinusOne = 3 in avcC).
  const samples = frames.map((frame) => concat([u32(frame.length), frame]));

  const avcC = box(
    'avcC',
    u8(1), // configurationVersion
    u8(stream.profile),
    u8(stream.constraints),
    u8(stream.level),
    u8(0xff), // reserved + lengthSizeMinusOne = 3
    u8(0xe1), // reserved + one SPS
    u16(stream.sps.length),
    stream.sps,
    u8(1), // one PPS
    u16(stream.pps.length),
    stream.pps,
  );
  const compressorName = new Uint8Array(32);
  const name = ascii('genservice I_PCM');
  compressorName[0] = name.length;
  compressorName.set(name, 1);
  const avc1 = box(
    'avc1',
    zeros(6),
    u16(1), // data_reference_index
    zeros(16), // pre_defined, reserved
    u16(width),
    u16(height),
    u32(0x00480000), // 72 dpi
    u32(0x00480000),
    u32(0),
    u16(1), // frame_count per sample
    compressorName,
    u16(0x0018), // depth: colour, no alpha
    u16(0xffff), // pre_defined = -1
    avcC,
  );

  const buildMoov = (chunkOffset: number): Uint8Array => {
    const stbl = box(
      'stbl',
      fullBox('stsd', 0, 0, u32(1), avc1),
      fullBox('stts', 0, 0, u32(1), u32(frames.length), u32(delta)),
      fullBox('stsc', 0, 0, u32(1), u32(1), u32(frames.length), u32(1)),
      fullBox('stsz', 0, 0, u32(0), u32(frames.length), ...samples.map((s) => u32(s.length))),
      fullBox('stco', 0, 0, u32(1), u32(chunkOffset)),
      // No stss box: every sample is a sync sample (each frame is an IDR picture).
    );
    const minf = box(
      'minf',
      fullBox('vmhd', 0, 1, zeros(8)),
      box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1))),
      stbl,
    );
    const mdia = box(
      'mdia',
      fullBox('mdhd', 0, 0, u32(0), u32(0), u32(TIMESCALE), u32(mediaDuration), u16(0x55c4) /* "und" */, u16(0)),
      fullBox('hdlr', 0, 0, u32(0), ascii('vide'), zeros(12), ascii('VideoHandler\0')),
      minf,
    );
    const tkhd = fullBox(
      'tkhd',
      0,
      0x3, // enabled, in movie
      u32(0), u32(0), // creation, modification: fixed so output is deterministic
      u32(1), // track_ID
      u32(0),
      u32(movieDuration),
      zeros(8),
      u16(0), u16(0), u16(0), u16(0), // layer, alternate_group, volume, reserved
      MATRIX,
      u32(width * 65536),
      u32(height * 65536),
    );
    const mvhd = fullBox(
      'mvhd',
      0,
      0,
      u32(0), u32(0),
      u32(movieTimescale),
      u32(movieDuration),
      u32(0x00010000), // rate 1.0
      u16(0x0100), // volume 1.0
      zeros(10),
      MATRIX,
      zeros(24),
      u32(2), // next_track_ID
    );
    return box('moov', mvhd, box('trak', tkhd, mdia));
  };

  const ftyp = box('ftyp', ascii('isom'), u32(0x200), ascii('isom'), ascii('iso2'), ascii('avc1'), ascii('mp41'));
  // The chunk offset is a fixed-width field, so the moov size does not depend on its value.
  const moovSize = buildMoov(0).length;
  const moov = buildMoov(ftyp.length + moovSize + 8);
  const mdat = box('mdat', ...samples);
  return concat([ftyp, moov, mdat]);
}
