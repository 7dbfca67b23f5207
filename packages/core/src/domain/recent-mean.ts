/** The mean of the last `size` values recorded (a ring: O(1) per record). */
export class RecentMean {
  private readonly values: number[] = [];
  private next = 0;
  private total = 0;

  constructor(private readonly size: number) {}

  /** Records one value (a negative or non-number one is ignored). */
  record(value: number): void {
    if (!(value >= 0)) return;
    if (this.values.length < this.size) {
      this.values.push(value);
    } else {
      this.total -= this.values[this.next]!;
      this.values[this.next] = value;
      this.next = (this.next + 1) % this.size;
    }
    this.total += value;
  }

  /** The mean of the recent values; undefined before the first. */
  get mean(): number | undefined {
    return this.values.length === 0 ? undefined : this.total / this.values.length;
  }
}
