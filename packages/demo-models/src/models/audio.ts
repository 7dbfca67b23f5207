import type { ModelDefinition } from '@genservice/core';
import { encodeWav } from '../formats/wav.js';
import { Pacer } from '../util/abort.js';
import { canonicalSettings, seededRandom } from '../util/random.js';
import { budgetMs, selectSetting, textSetting, type DemoModel } from './types.js';

export const AUDIO_DURATIONS = ['3', '5', '10'] as const;
export const AUDIO_INSTRUMENTS = ['sine', 'square', 'pluck'] as const;
export const AUDIO_SAMPLE_RATE = 22_050;

// Scales as semitone offsets; pentatonic scales cannot sound wrong, whichever notes the seed picks.
const SCALES: Record<string, number[]> = {
  majorPentatonic: [0, 2, 4, 7, 9],
  minorPentatonic: [0, 3, 5, 7, 10],
  dorian: [0, 2, 3, 5, 7, 9, 10],
};
const MINOR_WORDS = /\b(sad|night|dark|rain|lonely|winter|storm|blue|melancholy)\b/i;

const definition: ModelDefinition = {
  modelId: 'demo-audio',
  title: 'Demo audio (WAV melody from the prompt)',
  resultType: 'audio',
  estimatedGenerationTime: 3,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'duration', title: 'Duration (seconds)', fieldType: 'select', options: [...AUDIO_DURATIONS] },
    { name: 'instrument', title: 'Instrument', fieldType: 'select', options: [...AUDIO_INSTRUMENTS] },
  ],
  // 4 tokens, 6 for the 10-second clip.
  price: (settings) => (selectSetting(settings, 'duration', AUDIO_DURATIONS) === '10' ? 6 : 4),
  timeoutMs: 30_000,
  // On the OpenAI-compatible surface (POST /openai/v1/audio/speech): the text to speak is the prompt, the voice the
  // instrument (`sine`, `square`, `pluck`).
  openai: { params: { input: 'prompt', voice: 'instrument' } },
};

interface Note {
  start: number;
  length: number;
  frequency: number;
  velocity: number;
}

/** Renders the melody as mono 16-bit samples; exported for tests that inspect the waveform. */
export function renderMelody(prompt: string, seconds: number, instrument: (typeof AUDIO_INSTRUMENTS)[number]): Int16Array {
  const random = seededRandom(definition.modelId, canonicalSettings({ prompt, duration: String(seconds), instrument }));
  const scale = MINOR_WORDS.test(prompt) ? random.pick([SCALES.minorPentatonic, SCALES.dorian]) : random.pick([SCALES.majorPentatonic, SCALES.dorian]);
  const root = 220 * 2 ** (random.int(0, 11) / 12);
  const bpm = random.int(84, 140);
  const beat = 60 / bpm;
  const frequencyOf = (degree: number, octave: number): number => {
    const steps = scale[((degree % scale.length) + scale.length) % scale.length] + 12 * (octave + Math.floor(degree / scale.length));
    return root * 2 ** (steps / 12);
  };

  // A random walk over scale degrees, with a held bass note at the start of every bar.
  const notes: Note[] = [];
  let degree = random.int(0, scale.length - 1);
  for (let time = 0; time < seconds - beat / 2; ) {
    const length = beat * random.pick([0.5, 0.5, 1, 1, 1, 1.5, 2]);
    if (!random.chance(0.12)) notes.push({ start: time, length, frequency: frequencyOf(degree, 1), velocity: random.range(0.55, 0.9) });
    degree += random.pick([-2, -1, -1, 1, 1, 2, 0, 3]);
    degree = Math.max(-3, Math.min(scale.length * 2, degree));
    time += length;
  }
  for (let bar = 0; bar * beat * 4 < seconds; bar++) {
    notes.push({ start: bar * beat * 4, length: beat * 3.5, frequency: frequencyOf(random.pick([0, 0, 3, 4]), -1), velocity: 0.45 });
  }

  const total = Math.round(seconds * AUDIO_SAMPLE_RATE);
  const mix = new Float64Array(total);
  for (const note of notes) {
    const from = Math.floor(note.start * AUDIO_SAMPLE_RATE);
    const to = Math.min(total, Math.floor((note.start + note.length) * AUDIO_SAMPLE_RATE));
    const period = AUDIO_SAMPLE_RATE / note.frequency;
    // Karplus-Strong: a noise burst through a delay line with damping, which sounds like a plucked string.
    const ring = instrument === 'pluck' ? Float64Array.from({ length: Math.max(2, Math.round(period)) }, () => random.range(-1, 1)) : undefined;
    for (let i = from; i < to; i++) {
      const t = (i - from) / AUDIO_SAMPLE_RATE;
      const remaining = (to - i) / AUDIO_SAMPLE_RATE;
      // Short attack and release ramps avoid clicks at note edges.
      const envelope = Math.min(1, t / 0.01) * Math.min(1, remaining / 0.03) * Math.exp(-t * 1.8);
      let value: number;
      if (ring) {
        const k = (i - from) % ring.length;
        const next = (k + 1) % ring.length;
        value = ring[k];
        ring[k] = 0.996 * 0.5 * (ring[k] + ring[next]);
      } else {
        const phase = ((i - from) / period) % 1;
        value = instrument === 'square' ? (phase < 0.5 ? 0.35 : -0.35) : Math.sin(2 * Math.PI * phase);
      }
      mix[i] += value * envelope * note.velocity;
    }
  }
  const samples = new Int16Array(total);
  const fade = AUDIO_SAMPLE_RATE * 0.25;
  for (let i = 0; i < total; i++) {
    const edge = Math.min(1, (total - i) / fade);
    // tanh keeps overlapping notes from clipping harshly.
    samples[i] = Math.round(Math.tanh(mix[i] * 0.6) * edge * 32000);
  }
  return samples;
}

export const audioModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const seconds = Number(selectSetting(settings, 'duration', AUDIO_DURATIONS));
    const instrument = selectSetting(settings, 'instrument', AUDIO_INSTRUMENTS);
    const samples = renderMelody(prompt, seconds, instrument);
    await pacer.reach(0.5);
    const bytes = encodeWav(samples, AUDIO_SAMPLE_RATE);
    await pacer.reach(1);
    return { bytes, mimeType: 'audio/wav' };
  },
};
