// A model's settings descriptors as a form: one labelled control per setting, read back as the `settings` object.

const MEDIA_TYPES = new Set(['image', 'video', 'audio', 'file']);

/**
 * @param {keyof HTMLElementTagNameMap} tag
 * @param {Record<string, string | boolean | undefined>} [attrs]
 * @param {Array<Node | string>} [children]
 */
export function h(tag, attrs = {}, children = []) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) el.append(c);
  return el;
}

/** A name safe inside an element id. */
function idPart(name) {
  return name.replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0).toString(16)}`);
}

/** What a media setting's file picker offers first (any file can still be chosen; the service checks the type). */
const ACCEPT = { image: 'image/*', audio: 'audio/*', video: 'video/*' };

/**
 * @typedef {{ name: string, title: string, fieldType: string, required?: boolean, options?: string[] }} Descriptor
 * @typedef {{ descriptor: Descriptor, wrap: HTMLElement, error: HTMLElement, read(): unknown, focus(): void, inputs(): HTMLElement[], add?(url: string): void }} Field
 * @typedef {(file: File) => Promise<{ ok: boolean, data: any, error: { message: string } | null }>} Uploader
 */

export class SettingsForm {
  /**
   * @param {HTMLElement} container
   * @param {() => void} onChange
   * @param {Uploader} [upload] sends a picked file (`POST v1/uploads`); without it media settings take URLs only
   */
  constructor(container, onChange, upload) {
    this.container = container;
    this.onChange = onChange;
    this.upload = upload;
    /** @type {Map<string, Field>} */
    this.fields = new Map();
  }

  /** @param {Descriptor[]} settings */
  render(settings) {
    this.container.replaceChildren();
    this.fields.clear();
    for (const d of settings) {
      const field = MEDIA_TYPES.has(d.fieldType) ? this.mediaField(d) : this.singleField(d);
      this.fields.set(d.name, field);
      this.container.append(field.wrap);
    }
  }

  /**
   * The label is exactly the descriptor's title (so the control's accessible name is the title); a required one gets a
   * visible mark beside it, hidden from assistive technology, which hears `required` from the control itself.
   */
  label(d, forId) {
    const label = h('label', { for: forId }, [d.title]);
    return d.required ? h('div', { class: 'label-row' }, [label, h('span', { class: 'req', 'aria-hidden': 'true', text: '*' })]) : label;
  }

  /** `text` a text area, `select` a select of its options, anything unknown a one-line text input. */
  singleField(d) {
    const id = `setting-${idPart(d.name)}`;
    const errorId = `${id}-error`;
    const error = h('p', { id: errorId, class: 'error', hidden: true });
    let control;
    if (d.fieldType === 'select') {
      control = h('select', { id, name: d.name, required: d.required, 'aria-describedby': errorId });
      control.append(h('option', { value: '', text: d.required ? 'Choose…' : 'Default' }));
      for (const o of d.options ?? []) control.append(h('option', { value: o, text: o }));
    } else if (d.fieldType === 'text') {
      control = h('textarea', { id, name: d.name, rows: '3', required: d.required, 'aria-describedby': errorId });
    } else {
      control = h('input', { id, name: d.name, type: 'text', required: d.required, 'aria-describedby': errorId });
    }
    control.addEventListener('input', () => this.onChange());
    control.addEventListener('change', () => this.onChange());
    const wrap = h('div', { class: 'field', 'data-setting': d.name }, [this.label(d, id), control, error]);
    return {
      descriptor: d,
      wrap,
      error,
      read: () => (control.value.trim() === '' ? undefined : control.value),
      focus: () => control.focus(),
      inputs: () => [control],
    };
  }

  /**
   * A media setting: a list of URL inputs, one to start with, with add and remove buttons, and a file picker that
   * uploads the file (`POST v1/uploads`) and puts its URL in the first empty row.
   */
  mediaField(d) {
    const id = `setting-${idPart(d.name)}`;
    const errorId = `${id}-error`;
    const error = h('p', { id: errorId, class: 'error', hidden: true });
    const list = h('ol', { class: 'urls' });
    const legend = h('legend', {}, [d.title]);
    if (d.required) legend.append(h('span', { class: 'req', 'aria-hidden': 'true', text: ' *' }), h('span', { class: 'sr-only', text: ' (required)' }));
    const add = h('button', { type: 'button', class: 'small', text: 'Add a URL' });
    add.setAttribute('aria-label', `Add a URL to ${d.title}`);
    const pickId = `${id}-file`;
    const picker = h('input', { type: 'file', id: pickId, class: 'file-pick', accept: ACCEPT[d.fieldType], 'aria-describedby': errorId });
    const pickLabel = h('label', { for: pickId, class: 'file-label', text: `Upload a file to ${d.title}` });
    const pickStatus = h('p', { class: 'muted upload-status', role: 'status' });
    const pick = h('div', { class: 'file-row', hidden: !this.upload }, [pickLabel, picker, pickStatus]);
    const wrap = h('fieldset', { class: 'field media', 'data-setting': d.name, 'aria-describedby': errorId }, [legend, list, add, pick, error]);
    const renumber = () => {
      [...list.children].forEach((li, i) => {
        const input = li.querySelector('input');
        const label = li.querySelector('label');
        const remove = li.querySelector('button');
        input.id = `${id}-${i}`;
        label.htmlFor = input.id;
        label.textContent = `${d.title} URL ${i + 1}`;
        remove.setAttribute('aria-label', `Remove ${d.title} URL ${i + 1}`);
        if (d.required) input.setAttribute('aria-required', 'true');
      });
    };
    const addRow = (focus) => {
      const input = h('input', { type: 'url', inputmode: 'url', placeholder: 'https://…', 'aria-describedby': errorId });
      input.addEventListener('input', () => this.onChange());
      const remove = h('button', { type: 'button', class: 'small', text: 'Remove' });
      const li = h('li', {}, [h('label', { class: 'url-label' }), input, remove]);
      remove.addEventListener('click', () => {
        const next = li.nextElementSibling ?? li.previousElementSibling;
        li.remove();
        if (!list.children.length) addRow(false);
        renumber();
        this.onChange();
        (next?.querySelector('input') ?? list.querySelector('input'))?.focus();
      });
      list.append(li);
      renumber();
      if (focus) input.focus();
    };
    add.addEventListener('click', () => addRow(true));
    addRow(false);
    /** Puts a URL in the first empty row, or a new row. */
    const fill = (url) => {
      let input = [...list.querySelectorAll('input')].find((i) => i.value.trim() === '');
      if (!input) {
        addRow(false);
        input = list.lastElementChild.querySelector('input');
      }
      input.value = url;
      input.removeAttribute('aria-invalid');
      this.onChange();
    };
    picker.addEventListener('change', async () => {
      const file = picker.files?.[0];
      if (!file || !this.upload) return;
      error.hidden = true;
      pickStatus.textContent = `Uploading ${file.name}…`;
      picker.disabled = true;
      try {
        const answer = await this.upload(file);
        if (!answer.ok) {
          pickStatus.textContent = '';
          error.textContent = `${file.name} was not uploaded: ${answer.error?.message ?? 'the service refused it.'}`;
          error.hidden = false;
          return;
        }
        fill(answer.data.url);
        const until = new Date(answer.data.expiresAt);
        pickStatus.textContent = `Uploaded ${file.name}${Number.isNaN(until.getTime()) ? '' : `; its link works until ${until.toLocaleTimeString(undefined, { timeStyle: 'short' })}`}.`;
      } finally {
        picker.disabled = false;
        picker.value = '';
      }
    });
    return {
      descriptor: d,
      wrap,
      error,
      add: fill,
      read: () => {
        const urls = [...list.querySelectorAll('input')].map((i) => i.value.trim()).filter(Boolean);
        return urls.length ? urls : undefined;
      },
      focus: () => list.querySelector('input')?.focus(),
      inputs: () => [...list.querySelectorAll('input')],
    };
  }

  /** The name of the first media setting of this type (`image`, `audio`, ...), or undefined. */
  mediaSetting(fieldType) {
    for (const [name, f] of this.fields) if (f.descriptor.fieldType === fieldType && f.add) return name;
    return undefined;
  }

  /** Puts `url` in the media setting `name` (its first empty row, or a new one) and focuses it. */
  addUrl(name, url) {
    const f = this.fields.get(name);
    if (!f?.add) return;
    f.add(url);
    f.wrap.scrollIntoView?.({ block: 'nearest' });
  }

  /** The `settings` object of a create: only what the user filled in (the model's defaults apply to the rest). */
  read() {
    const settings = {};
    for (const [name, f] of this.fields) {
      const v = f.read();
      if (v !== undefined) settings[name] = v;
    }
    return settings;
  }

  clearErrors() {
    for (const f of this.fields.values()) {
      f.error.hidden = true;
      f.error.textContent = '';
      for (const i of f.inputs()) i.removeAttribute('aria-invalid');
    }
  }

  /**
   * Marks fields as wrong; `messages` by setting name. Focuses the first. Returns the names it could not place.
   * @param {Map<string, string[]>} messages
   */
  showErrors(messages) {
    const unplaced = [];
    let first;
    for (const [name, list] of messages) {
      const f = this.fields.get(name);
      if (!f) {
        unplaced.push(...list);
        continue;
      }
      f.error.textContent = list.join(' ');
      f.error.hidden = false;
      for (const i of f.inputs()) i.setAttribute('aria-invalid', 'true');
      first ??= f;
    }
    first?.focus();
    return unplaced;
  }

  /** The page's own check before sending: required settings filled in. */
  missingRequired() {
    const missing = new Map();
    for (const [name, f] of this.fields) {
      if (f.descriptor.required && f.read() === undefined) missing.set(name, [`${f.descriptor.title} is required.`]);
    }
    return missing;
  }
}

/**
 * The API's `details` (`field` is `settings.<name>` or `settings.<name>.<index>`) grouped by setting name; other
 * fields under the key `''`.
 * @param {Array<{ field?: string, message: string }>} details
 */
export function detailsBySetting(details) {
  const out = new Map();
  for (const d of details ?? []) {
    const m = /^settings\.([^.]+)(?:\.(\d+))?$/.exec(d.field ?? '');
    const key = m ? m[1] : '';
    const text = m && m[2] !== undefined ? `URL ${Number(m[2]) + 1}: ${d.message}` : d.message;
    out.set(key, [...(out.get(key) ?? []), text]);
  }
  return out;
}
