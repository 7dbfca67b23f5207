/**
 * A minimal H.264 encoder that codes every macroblock as I_PCM: raw 4:2:0 samples with no prediction or transform.
 * Files are large (about 1.5 bytes per pixel per frame) but it is a few dozen lines, exact, and decodable by every
 * conforming Baseline decoder, which is what lets browsers play the demo clips with no codec of our own beyond this.
 */

import type { RgbaImage } from './png.js';

class BitWriter {
  private readonly bytes: number[] = [];
  private current = 0;
  private bitCount = 0;

  bit(value: number): void {
    this.current = (this.current << 1) | (value & 1);
    this.bitCount++;
    if (this.bitCount === 8) {
      this.bytes.push(this.current);
      this.current = 0;
      this.bitCount = 0;
    }
  }

  bits(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) this.bit((value >>> i) & 1);
  }

  /** Unsigned Exp-Golomb, ue(v). */
  ue(value: number): void {
    const coded = value + 1;
    const length = 32 - Math.clz32(coded);
    this.bits(0, length - 1);
    this.bits(coded, length);
  }

  /** Signed Exp-Golomb, se(v). */
  se(value: number): void {
    this.ue(value <= 0 ? -2 * value : 2 * value - 1);
  }

  get aligned(): boolean {
    return this.bitCount === 0;
  }

  alignZero(): void {
    while (this.bitCount !== 0) this.bit(0);
  }

  /** Whole bytes; only valid when aligned. */
  raw(bytes: Uint8Array): void {
    if (!this.aligned) throw new Error('raw bytes need byte alignment');
    for (const b of bytes) this.bytes.push(b);
  }

  /** rbsp_trailing_bits: a one, then zeros to the byte boundary. */
  trailing(): Uint8Array {
    this.bit(1);
    this.alignZero();
    return Uint8Array.from(this.bytes);
  }
}

/** Inserts emulation-prevention bytes so the payload never contains a start code (00 00 0x). */
export function escapeRbsp(rbsp: Uint8Array): Uint8Array {
  const out = new Uint8Array(rbsp.length + Math.ceil(rbsp.length / 2) + 1);
  let length = 0;
  let zeros = 0;
  for (const byte of rbsp) {
    if (zeros === 2 && byte <= 3) {
      out[length++] = 3;
      zeros = 0;
    }
    out[length++] = byte;
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  return out.slice(0, length);
}

function nal(refIdc: number, type: number, rbsp: Uint8Array): Uint8Array {
  const escaped = escapeRbsp(rbsp);
  const out = new Uint8Array(escaped.length + 1);
  out[0] = (refIdc << 5) | type;
  out.set(escaped, 1);
  return out;
}

export interface H264Stream {
  sps: Uint8Array;
  pps: Uint8Array;
  profile: number;
  constraints: number;
  level: number;
}

const PROFILE_BASELINE = 66;
// constraint_set0 and constraint_set1: Constrained Baseline, the profile browsers are sure to decode.
const CONSTRAINTS = 0b1100_0000;

/** The lowest level whose frame-size and bit-rate limits fit; I_PCM's raw rate pushes small clips to level 3. */
function levelFor(macroblocks: number, fps: number): number {
  const bitsPerSecond = macroblocks * 384 * 8 * fps;
  const levels: Array<[level: number, maxFrameMbs: number, maxMbps: number, maxKbps: number]> = [
    [30, 1620, 40500, 10000],
    [31, 3600, 108000, 14000],
    [32, 5120, 216000, 20000],
    [40, 8192, 245760, 20000],
    [41, 8192, 245760, 50000],
  ];
  for (const [level, maxFrameMbs, maxMbps, maxKbps] of levels) {
    if (macroblocks <= maxFrameMbs && macroblocks * fps <= maxMbps && bitsPerSecond <= maxKbps * 1000) return level;
  }
  return 51;
}

/** SPS and PPS for a `width` x `height` stream (any even size; the padding to whole macroblocks is cropped). */
export function h264Headers(width: number, height: number, fps: number): H264Stream {
  if (width % 2 !== 0 || height % 2 !== 0) throw new RangeError('4:2:0 video needs an even width and height');
  const mbWidth = Math.ceil(width / 16);
  const mbHeight = Math.ceil(height / 16);
  const level = levelFor(mbWidth * mbHeight, fps);

  const sps = new BitWriter();
  sps.bits(PROFILE_BASELINE, 8);
  sps.bits(CONSTRAINTS, 8);
  sps.bits(level, 8);
  sps.ue(0); // seq_parameter_set_id
  sps.ue(0); // log2_max_frame_num_minus4: every frame is an IDR, frame_num stays 0
  sps.ue(2); // pic_order_cnt_type 2: output order = decode order, no POC syntax in slices
  sps.ue(1); // max_num_ref_frames
  sps.bit(0); // gaps_in_frame_num_value_allowed_flag
  sps.ue(mbWidth - 1);
  sps.ue(mbHeight - 1);
  sps.bit(1); // frame_mbs_only_flag
  sps.bit(1); // direct_8x8_inference_flag
  const cropRight = mbWidth * 16 - width;
  const cropBottom = mbHeight * 16 - height;
  if (cropRight > 0 || cropBottom > 0) {
    // Crop offsets count chroma samples (2 luma pixels each way in 4:2:0).
    sps.bit(1);
    sps.ue(0);
    sps.ue(cropRight / 2);
    sps.ue(0);
    sps.ue(cropBottom / 2);
  } else {
    sps.bit(0);
  }
  sps.bit(0); // vui_parameters_present_flag: timing lives in the container

  const pps = new BitWriter();
  pps.ue(0); // pic_parameter_set_id
  pps.ue(0); // seq_parameter_set_id
  pps.bit(0); // entropy_coding_mode_flag: CAVLC
  pps.bit(0); // bottom_field_pic_order_in_frame_present_flag
  pps.ue(0); // num_slice_groups_minus1
  pps.ue(0); // num_ref_idx_l0_default_active_minus1
  pps.ue(0); // num_ref_idx_l1_default_active_minus1
  pps.bit(0); // weighted_pred_flag
  pps.bits(0, 2); // weighted_bipred_idc
  pps.se(0); // pic_init_qp_minus26
  pps.se(0); // pic_init_qs_minus26
  pps.se(0); // chroma_qp_index_offset
  pps.bit(1); // deblocking_filter_control_present_flag, so slices can switch the filter off
  pps.bit(0); // constrained_intra_pred_flag
  pps.bit(0); // redundant_pic_cnt_present_flag

  return {
    sps: nal(3, 7, sps.trailing()),
    pps: nal(3, 8, pps.trailing()),
    profile: PROFILE_BASELINE,
    constraints: CONSTRAINTS,
    level,
  };
}

/** BT.601 limited-range conversion, the colour space decoders assume when the stream does not say. */
function toYuv420(image: RgbaImage, mbWidth: number, mbHeight: number): { y: Uint8Array; u: Uint8Array; v: Uint8Array } {
  const { width, height, data } = image;
  const lumaWidth = mbWidth * 16;
  const lumaHeight = mbHeight * 16;
  const y = new Uint8Array(lumaWidth * lumaHeight);
  const u = new Uint8Array((lumaWidth / 2) * (lumaHeight / 2));
  const v = new Uint8Array(u.length);
  // Edge pixels are repeated into the padding so the cropped-away area does not bleed dark into the picture.
  const at = (x: number, yy: number): number => (Math.min(yy, height - 1) * width + Math.min(x, width - 1)) * 4;
  for (let row = 0; row < lumaHeight; row++) {
    for (let col = 0; col < lumaWidth; col++) {
      const i = at(col, row);
      y[row * lumaWidth + col] = ((66 * data[i] + 129 * data[i + 1] + 25 * data[i + 2] + 128) >> 8) + 16;
    }
  }
  for (let row = 0; row < lumaHeight / 2; row++) {
    for (let col = 0; col < lumaWidth / 2; col++) {
      let r = 0;
      let g = 0;
      let b = 0;
      for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
        const i = at(col * 2 + dx, row * 2 + dy);
        r += data[i];
        g += data[i + 1];
        b += data[i + 2];
      }
      r /= 4;
      g /= 4;
      b /= 4;
      u[row * (lumaWidth / 2) + col] = Math.round((-38 * r - 74 * g + 112 * b) / 256) + 128;
      v[row * (lumaWidth / 2) + col] = Math.round((112 * r - 94 * g - 18 * b) / 256) + 128;
    }
  }
  return { y, u, v };
}

/**
 * One frame as a single IDR slice NAL unit (without a start code or length prefix). `idrPicId` must differ between
 * consecutive frames, as the standard requires of back-to-back IDR pictures.
 */
export function encodeIdrFrame(image: RgbaImage, idrPicId: number): Uint8Array {
  const mbWidth = Math.ceil(image.width / 16);
  const mbHeight = Math.ceil(image.height / 16);
  const { y, u, v } = toYuv420(image, mbWidth, mbHeight);
  const lumaWidth = mbWidth * 16;
  const chromaWidth = lumaWidth / 2;

  const w = new BitWriter();
  w.ue(0); // first_mb_in_slice
  w.ue(7); // slice_type: I, and every slice of the picture is I
  w.ue(0); // pic_parameter_set_id
  w.bits(0, 4); // frame_num (log2_max_frame_num = 4)
  w.ue(idrPicId);
  w.bit(0); // no_output_of_prior_pics_flag
  w.bit(0); // long_term_reference_flag
  w.se(0); // slice_qp_delta
  w.ue(1); // disable_deblocking_filter_idc: off, PCM samples are exact already

  const block = new Uint8Array(384);
  for (let mbY = 0; mbY < mbHeight; mbY++) {
    for (let mbX = 0; mbX < mbWidth; mbX++) {
      w.ue(25); // mb_type I_PCM
      w.alignZero(); // pcm_alignment_zero_bit
      let k = 0;
      for (let row = 0; row < 16; row++) {
        const start = (mbY * 16 + row) * lumaWidth + mbX * 16;
        block.set(y.subarray(start, start + 16), k);
        k += 16;
      }
      for (const plane of [u, v]) {
        for (let row = 0; row < 8; row++) {
          const start = (mbY * 8 + row) * chromaWidth + mbX * 8;
          block.set(plane.subarray(start, start + 8), k);
          k += 8;
        }
      }
      w.raw(block);
    }
  }
  return nal(3, 5, w.trailing());
}
