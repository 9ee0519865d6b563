#include "data/batches.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/random.h"
#include "data/loader.h"

namespace snug {

namespace {

// Tokens [begin, begin + n) of another source: the two sides of an --eval-split of a stream.
class SliceTokenSource final : public TokenSource {
 public:
  SliceTokenSource(std::shared_ptr<const TokenSource> base, int64_t begin, int64_t n,
                   std::string what)
      : base_(std::move(base)), begin_(begin), n_(n), what_(std::move(what)) {}
  int64_t size() const override { return n_; }
  void read(int64_t begin, int64_t n, int32_t* out) const override {
    check_range(begin, n);
    base_->read(begin_ + begin, n, out);
  }
  int64_t vocab_size() const override { return base_->vocab_size(); }
  std::string describe() const override {
    return detail::concat(base_->describe(), ", ", what_, " tokens [", begin_, ", ", begin_ + n_,
                          ")");
  }

 private:
  std::shared_ptr<const TokenSource> base_;
  int64_t begin_, n_;
  std::string what_;
};

std::vector<uint32_t> permutation(size_t n, uint64_t seed, uint64_t salt) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  SplitMix64 rng(splitmix64_mix(seed) ^ splitmix64_mix(salt));
  for (size_t i = n; i-- > 1;) {
    const auto j = static_cast<size_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

// Best-fit decreasing (TRL's "bfd" packing): longest example first, each into the open row with
// the least room that still fits it, else a new row.
std::vector<std::vector<int32_t>> pack_rows(const std::vector<Example>& ex, int64_t T) {
  std::vector<int32_t> by_len(ex.size());
  std::iota(by_len.begin(), by_len.end(), 0);
  std::stable_sort(by_len.begin(), by_len.end(), [&](int32_t a, int32_t b) {
    return ex[static_cast<size_t>(a)].ids.size() > ex[static_cast<size_t>(b)].ids.size();
  });
  std::vector<std::vector<int32_t>> rows;
  std::multimap<int64_t, size_t> room;  // free tokens -> row
  for (int32_t e : by_len) {
    const auto len = static_cast<int64_t>(ex[static_cast<size_t>(e)].ids.size());
    auto it = room.lower_bound(len);
    size_t row;
    int64_t left;
    if (it == room.end()) {
      row = rows.size();
      rows.emplace_back();
      left = T;
    } else {
      row = it->second;
      left = it->first;
      room.erase(it);
    }
    rows[row].push_back(e);
    if (left - len > 0) room.emplace(left - len, row);
  }
  return rows;
}

}  // namespace

BatchSource::BatchSource(const DataShard& shard) : shard_(shard) {
  SNUG_CHECK(shard.world >= 1 && shard.rank >= 0 && shard.rank < shard.world, "data loader: rank ",
             shard.rank, " of a world of ", shard.world, " (needs 0 <= rank < world)");
}

int64_t BatchSource::next_rows(int64_t rows, int32_t* inputs, int32_t* targets,
                               int32_t* positions) {
  if (shard_.world == 1) return read_rows(rows, inputs, targets, positions);
  SNUG_ASSERT(rows >= 1 && rows <= batch_size(), "rows ", rows);
  skip_rows(shard_.rank * rows);
  const int64_t cols = read_rows(rows, inputs, targets, positions);
  skip_rows((shard_.world - 1 - shard_.rank) * rows);
  return cols;
}

void BatchSource::skip_rows(int64_t rows) {
  for (int64_t done = 0; done < rows;) {
    const int64_t n = std::min(batch_size(), rows - done);
    read_rows(n, nullptr, nullptr, nullptr);
    done += n;
  }
}

ExampleLoader::ExampleLoader(const std::vector<Example>& examples, int64_t B, int64_t T,
                             uint64_t seed, const ExampleBatching& how, const DataShard& shard)
    : BatchSource(shard), ex_(examples), B_(B), T_(T), seed_(seed), how_(how) {
  SNUG_CHECK(B >= 1, "data loader: batch size must be at least 1, got ", B);
  SNUG_CHECK(T >= 1, "data loader: sequence length must be at least 1, got ", T);
  SNUG_CHECK(!examples.empty(), "data loader: no examples");
  for (size_t i = 0; i < examples.size(); ++i)
    SNUG_ASSERT(!examples[i].ids.empty() && static_cast<int64_t>(examples[i].ids.size()) <= T &&
                    examples[i].ids.size() == examples[i].labels.size(),
                "example ", i);
  if (how_.packing) {
    rows_ = pack_rows(examples, T);
  } else {
    rows_.resize(examples.size());
    for (size_t i = 0; i < examples.size(); ++i) rows_[i] = {static_cast<int32_t>(i)};
  }
  order_ = order(0);
}

int64_t BatchSource::sample_at(int64_t, int64_t) const {
  SNUG_ASSERT(false, "sequence classification on data that is not a token stream");
  return 0;
}

int64_t ExampleLoader::row_length(int64_t row) const {
  int64_t n = 0;
  for (int32_t e : rows_[static_cast<size_t>(row)])
    n += static_cast<int64_t>(ex_[static_cast<size_t>(e)].ids.size());
  return n;
}

std::vector<uint32_t> ExampleLoader::order(int64_t epoch) const {
  std::vector<uint32_t> o(rows_.size());
  std::iota(o.begin(), o.end(), 0u);
  if (how_.shuffle)
    o = permutation(rows_.size(), seed_, static_cast<uint64_t>(epoch) + 0x6578616d706c6573ull);
  if (how_.group_by_length) {
    // LengthGroupedSampler: megabatches of 50 (global) batches, each sorted longest first; the
    // longest row of all leads, so that a batch that does not fit shows at step 1.
    const size_t mega = static_cast<size_t>(50 * global_batch_size());
    for (size_t b = 0; b < o.size(); b += mega) {
      const auto end = o.begin() + static_cast<std::ptrdiff_t>(std::min(o.size(), b + mega));
      std::stable_sort(o.begin() + static_cast<std::ptrdiff_t>(b), end,
                       [&](uint32_t x, uint32_t y) { return row_length(x) > row_length(y); });
    }
    size_t longest = 0;
    for (size_t b = 0; b < o.size(); b += mega)
      if (row_length(o[b]) > row_length(o[longest])) longest = b;
    std::swap(o[0], o[longest]);
  }
  return o;
}

void ExampleLoader::advance() {
  if (++position_ == items_per_epoch()) {
    ++epoch_;
    position_ = 0;
    order_ = order(epoch_);
  }
}

void ExampleLoader::skip_rows(int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) advance();
}

int64_t ExampleLoader::read_rows(int64_t rows, int32_t* inputs, int32_t* targets,
                                 int32_t* positions) {
  SNUG_ASSERT(rows >= 1 && rows <= B_, "rows ", rows);
  std::vector<int64_t> picked(static_cast<size_t>(rows));
  int64_t cols = 1;
  for (int64_t r = 0; r < rows; ++r) {
    picked[static_cast<size_t>(r)] = order_[static_cast<size_t>(position_)];
    cols = std::max(cols, how_.packing ? T_ : row_length(picked[static_cast<size_t>(r)]));
    advance();
  }
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = 0;
    auto put = [&](int32_t in, int32_t tg, int32_t pos) {
      const int64_t i = r * cols + t++;
      if (inputs) inputs[i] = in;
      if (targets) targets[i] = tg;
      if (positions && how_.packing) positions[i] = pos;
    };
    for (int32_t e : rows_[static_cast<size_t>(picked[static_cast<size_t>(r)])]) {
      const Example& x = ex_[static_cast<size_t>(e)];
      const auto n = static_cast<int32_t>(x.ids.size());
      // A document's last token predicts nothing: never the next document's first.
      for (int32_t k = 0; k < n; ++k)
        put(x.ids[static_cast<size_t>(k)],
            k + 1 < n ? x.labels[static_cast<size_t>(k + 1)] : kIgnoreIndex, k);
    }
    // Padding. A while loop: `t` advances inside put, which clang's -Wfor-loop-analysis misses.
    int32_t k = 0;
    while (t < cols) put(how_.pad_id, kIgnoreIndex, k++);
  }
  return cols;
}

void ExampleLoader::seek(int64_t epoch, int64_t position) {
  SNUG_CHECK(epoch >= 0, "data loader: cannot seek to epoch ", epoch, " (must be >= 0)");
  SNUG_CHECK(position >= 0 && position < items_per_epoch(), "data loader: cannot seek to position ",
             position, " (an epoch of this dataset has ", items_per_epoch(), " rows)");
  if (epoch != epoch_) order_ = order(epoch);
  epoch_ = epoch;
  position_ = position;
}

std::unique_ptr<BatchSource> TokenStreamData::batches(int64_t B, int64_t T, uint64_t seed,
                                                      bool shuffle, const DataShard& shard) const {
  return std::make_unique<DataLoader>(*src_, B, T, seed, shuffle, shard);
}

std::unique_ptr<BatchSource> ExampleData::batches(int64_t B, int64_t T, uint64_t seed, bool shuffle,
                                                  const DataShard& shard) const {
  ExampleBatching how = how_;
  how.shuffle = shuffle;
  if (!shuffle) how.group_by_length = false;  // evaluation reads the examples in order
  return std::make_unique<ExampleLoader>(ex_, B, T, seed, how, shard);
}

namespace {

class FullRows final : public BatchSource {
 public:
  FullRows(int64_t B, int64_t T, const DataShard& shard) : BatchSource(shard), B_(B), T_(T) {
    SNUG_CHECK(B >= 1 && T >= 1, "full rows: batch ", B, " x ", T, " must be positive");
  }
  int64_t batch_size() const override { return B_; }
  int64_t seq_len() const override { return T_; }
  int64_t items_per_epoch() const override { return B_; }
  int64_t epoch() const override { return epoch_; }
  int64_t position() const override { return position_; }
  void seek(int64_t epoch, int64_t position) override {
    epoch_ = epoch;
    position_ = position;
  }

 protected:
  int64_t read_rows(int64_t rows, int32_t* inputs, int32_t* targets, int32_t*) override {
    SNUG_ASSERT(rows >= 1 && rows <= B_, "rows ", rows);
    if (inputs) std::fill_n(inputs, rows * T_, 0);
    if (targets) std::fill_n(targets, rows * T_, 0);
    position_ += rows;
    epoch_ += position_ / B_;
    position_ %= B_;
    return T_;
  }

 private:
  int64_t B_, T_, epoch_ = 0, position_ = 0;
};

}  // namespace

std::unique_ptr<BatchSource> FullRowsData::batches(int64_t B, int64_t T, uint64_t, bool,
                                                   const DataShard& shard) const {
  return std::make_unique<FullRows>(B, T, shard);
}

namespace {

std::string find_tokenizer(const DataOptions& o, const std::string& data) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!o.model.empty() && fs::exists(o.model, ec)) {
    const fs::path m = o.model;
    const fs::path dir = fs::is_directory(m, ec) ? m : m.parent_path();
    const fs::path t = (dir.empty() ? fs::path(".") : dir) / "tokenizer.json";
    if (fs::is_regular_file(t, ec)) return t.string();
  }
  throw Error(detail::concat(
      "--data ", data,
      ": jsonl records need a tokenizer: pass --tokenizer (a tokenizer.json or its folder), or "
      "a --model config.json with a tokenizer.json beside it"));
}

std::unique_ptr<TrainData> open_one(const DataOptions& o, const std::string& spec,
                                    std::optional<ModelTokenizer>& tok,
                                    std::vector<Example>* examples_out) {
  if (!is_jsonl_spec(spec)) {
    std::shared_ptr<const TokenSource> src = open_dataset(spec, o.vocab_size, o.seed);
    return std::make_unique<TokenStreamData>(std::move(src));
  }
  if (!tok) tok = ModelTokenizer::load(find_tokenizer(o, spec));
  SftData d = load_sft_data(spec, *tok, o.sft, o.seq_len);
  for (const Example& e : d.examples)
    for (size_t i = 0; i < e.ids.size(); ++i)
      SNUG_CHECK(e.ids[i] < o.vocab_size, "--data ", spec, ": token id ", e.ids[i], " of ",
                 tok->path, " is outside the model's vocabulary (", o.vocab_size, ")");
  ExampleBatching how;
  how.packing = o.packing;
  how.group_by_length = o.group_by_length;
  how.pad_id = tok->pad_id();
  if (examples_out) {
    *examples_out = std::move(d.examples);
    return nullptr;
  }
  return std::make_unique<ExampleData>(std::move(d.examples), d.describe, how);
}

}  // namespace

OpenedData open_data(const DataOptions& o) {
  SNUG_CHECK(o.eval_split >= 0.0 && o.eval_split < 1.0, "--eval-split must be in [0, 1), got ",
             o.eval_split);
  SNUG_CHECK(o.eval_split == 0.0 || o.eval_data.empty(),
             "--eval-split and --eval-data are exclusive: give one");
  if (!is_jsonl_spec(o.data)) {
    const char* flag = o.packing                   ? "--packing"
                       : o.group_by_length         ? "--group-by-length"
                       : o.sft.assistant_only_loss ? "--assistant-only-loss"
                                                   : nullptr;
    SNUG_CHECK(flag == nullptr, flag, " applies to jsonl data (records of examples); --data ",
               o.data, " is a token stream, cut into windows");
  }
  std::optional<ModelTokenizer> tok;
  OpenedData d;
  if (o.eval_split == 0.0) {
    d.train = open_one(o, o.data, tok, nullptr);
    if (!o.eval_data.empty()) d.eval = open_one(o, o.eval_data, tok, nullptr);
    return d;
  }
  if (!is_jsonl_spec(o.data)) {
    std::shared_ptr<const TokenSource> src = open_dataset(o.data, o.vocab_size, o.seed);
    const int64_t n = src->size();
    const auto eval_n = static_cast<int64_t>(std::ceil(o.eval_split * static_cast<double>(n)));
    SNUG_CHECK(eval_n >= 2 && n - eval_n >= 2, "--eval-split ", o.eval_split, " of ",
               src->describe(), " leaves ", n - eval_n, " tokens to train on and ", eval_n,
               " to evaluate");
    d.train = std::make_unique<TokenStreamData>(
        std::make_shared<SliceTokenSource>(src, 0, n - eval_n, "training"));
    d.eval = std::make_unique<TokenStreamData>(
        std::make_shared<SliceTokenSource>(src, n - eval_n, eval_n, "eval"));
    return d;
  }
  std::vector<Example> all;
  open_one(o, o.data, tok, &all);
  const size_t n = all.size();
  const auto eval_n = static_cast<size_t>(std::ceil(o.eval_split * static_cast<double>(n)));
  SNUG_CHECK(eval_n >= 1 && eval_n < n, "--eval-split ", o.eval_split, " of ", n,
             " examples leaves ", n - eval_n, " to train on and ", eval_n, " to evaluate");
  const std::vector<uint32_t> perm = permutation(n, o.seed, 0x6576616c73706c74ull);
  std::vector<Example> train, eval;
  for (size_t i = 0; i < n; ++i) (i < eval_n ? eval : train).push_back(std::move(all[perm[i]]));
  ExampleBatching how;
  how.packing = o.packing;
  how.group_by_length = o.group_by_length;
  how.pad_id = tok->pad_id();
  const std::string what = detail::concat("jsonl ", o.data);
  d.train = std::make_unique<ExampleData>(
      std::move(train), detail::concat(what, " (", n - eval_n, " training examples)"), how);
  d.eval = std::make_unique<ExampleData>(
      std::move(eval), detail::concat(what, " (", eval_n, " eval examples, --eval-split)"), how);
  return d;
}

}  // namespace snug
