#include "train/deepspeed_config.h"

#include <cmath>
#include <initializer_list>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "train/flag_table.h"

namespace snug {

namespace {

using nlohmann::json;
using TA = TrainingArguments;

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? excerpt(key) : path + "." + excerpt(key);
}

// A value as the message quotes it.
std::string value_shown(const json& v) {
  return excerpt(v.dump(), 48);
}

std::string shown_double(double v) {
  return format_number(v);
}

class Reader {
 public:
  Reader(const std::string& origin, const std::set<std::string>& given, TA& a)
      : origin_(origin), given_(given), a_(a) {}

  [[noreturn]] void refuse(const std::string& path, const std::string& why) const {
    throw Error(detail::concat(origin_, ": ", path, " ", why));
  }

  // `j` at `path` is an object whose keys are all in `known`.
  void keys(const json& j, const std::string& path,
            std::initializer_list<const char*> known) const {
    if (!j.is_object())
      refuse(path.empty() ? std::string("the file") : path,
             detail::concat("must be a JSON object, got ", value_shown(j)));
    for (const auto& [k, v] : j.items()) {
      bool ok = false;
      for (const char* n : known) ok = ok || k == n;
      if (ok) continue;
      std::string list;
      for (const char* n : known) list += detail::concat(list.empty() ? "" : ", ", n);
      refuse(join(path, k),
             detail::concat("is not a key snug reads (it reads ", path.empty() ? "" : path + ": ",
                            list, "; docs/distributed.md, \"--deepspeed\")"));
    }
  }

  static bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

  // The flag of JSON key `key` was given and holds something else than the file's value.
  void agree(bool differs, const std::string& path, const std::string& value,
             const std::string& key, const std::string& flag_value) const {
    if (!differs || given_.count(key) == 0) return;
    refuse(path,
           detail::concat("is ", value, ", but the command line gives ", flag_for_key(key).name(),
                          " ", flag_value, " (drop one, or make them agree)"));
  }

  template <typename Int>
  void set_int(const json& v, const std::string& path, Int TA::*m, const std::string& key,
               int64_t lo, int64_t hi) {
    if (is_auto(v)) return;
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      refuse(path, detail::concat("must be an integer in [", lo, ", ", hi, "] or \"auto\", got ",
                                  value_shown(v)));
    const int64_t x = v.get<int64_t>();
    agree(x != a_.*m, path, std::to_string(x), key, std::to_string(a_.*m));
    a_.*m = static_cast<Int>(x);
  }

  // A string setting whose accepted values the caller checked.
  void set_string(const json& v, const std::string& path, std::string TA::*m,
                  const std::string& key) {
    const std::string x = v.get<std::string>();
    agree(x != a_.*m, path, value_shown(v), key, a_.*m);
    a_.*m = x;
  }

  void set_double(const json& v, const std::string& path, double TA::*m, const std::string& key,
                  double lo, double hi) {
    if (is_auto(v)) return;
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
        v.get<double>() > hi)
      refuse(path, detail::concat("must be a number in [", shown_double(lo), ", ", shown_double(hi),
                                  "] or \"auto\", got ", value_shown(v)));
    const double x = v.get<double>();
    agree(x != a_.*m, path, shown_double(x), key, shown_double(a_.*m));
    a_.*m = x;
  }

  // A switch: true sets the flag; false with the flag given is a contradiction.
  void set_bool(const json& v, const std::string& path, bool TA::*m, const std::string& key) {
    if (is_auto(v)) return;
    if (!v.is_boolean())
      refuse(path, detail::concat("must be true, false or \"auto\", got ", value_shown(v)));
    const bool x = v.get<bool>();
    agree(x != a_.*m, path, x ? "true" : "false", key, a_.*m ? "(given)" : "(not given)");
    a_.*m = x;
  }

  // A setting snug has one value of: the file may state that value (or "auto"), nothing else.
  void only(const json& v, const std::string& path, double value, const std::string& what) const {
    if (is_auto(v)) return;
    if (!v.is_number() || v.get<double>() != value)
      refuse(path, detail::concat("is ", value_shown(v), "; snug's loss scaler ", what,
                                  " (torch's GradScaler), so only ", shown_double(value),
                                  " or \"auto\" is accepted"));
  }

  const std::string& origin_;
  const std::set<std::string>& given_;
  TA& a_;
};

void read_zero(Reader& r, const json& z) {
  const std::string p = "zero_optimization";
  r.keys(z, p, {"stage", "offload_optimizer", "offload_param"});
  if (z.contains("stage")) {
    r.set_int(z["stage"], p + ".stage", &TA::zero_stage, "zero_stage", 0, 3);
  }
  for (const char* part : {"offload_optimizer", "offload_param"}) {
    if (!z.contains(part)) continue;
    const std::string q = p + "." + part;
    r.keys(z[part], q, {"device"});
    if (!z[part].contains("device")) continue;
    const json& d = z[part]["device"];
    if (!d.is_string() || (d != "none" && d != "cpu" && d != "nvme"))
      r.refuse(q + ".device",
               detail::concat("must be \"none\", \"cpu\" or \"nvme\", got ", value_shown(d)));
    const bool optimizer = std::string(part) == "offload_optimizer";
    if (d == "nvme")
      r.refuse(q + ".device", detail::concat("is ", value_shown(d), ": snug does not offload ",
                                             optimizer ? "the optimizer" : "parameters",
                                             " to nvme (\"none\" or \"cpu\" are accepted)"));
    // --offload-optimizer, --offload-param (train/offload.h): "none" or "cpu".
    if (optimizer)
      r.set_string(d, q + ".device", &TA::offload_optimizer, "offload_optimizer");
    else
      r.set_string(d, q + ".device", &TA::offload_param, "offload_param");
  }
}

void read_fp16(Reader& r, const json& f) {
  const std::string p = "fp16";
  r.keys(f, p,
         {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
          "min_loss_scale"});
  if (f.contains("enabled")) r.set_bool(f["enabled"], p + ".enabled", &TA::fp16, "fp16");
  if (f.contains("loss_scale")) r.only(f["loss_scale"], p + ".loss_scale", 0, "is dynamic");
  if (f.contains("initial_scale_power"))
    r.only(f["initial_scale_power"], p + ".initial_scale_power", 16, "starts at 2^16");
  if (f.contains("loss_scale_window"))
    r.only(f["loss_scale_window"], p + ".loss_scale_window", 2000,
           "doubles the scale after 2000 steps without overflow");
  if (f.contains("hysteresis"))
    r.only(f["hysteresis"], p + ".hysteresis", 1, "halves the scale at the first overflow");
  if (f.contains("min_loss_scale")) {
    const json& m = f["min_loss_scale"];
    if (!Reader::is_auto(m) && (!m.is_number() || m.get<double>() > 1))
      r.refuse(p + ".min_loss_scale",
               detail::concat("is ", value_shown(m),
                              "; snug's loss scaler has no floor (torch's GradScaler), so only a "
                              "value <= 1 or \"auto\" is accepted"));
  }
}

void read_optimizer(Reader& r, const json& o, TA& a, const std::set<std::string>& given) {
  const std::string p = "optimizer";
  r.keys(o, p, {"type", "params"});
  if (!o.contains("type") || !o["type"].is_string() ||
      (o["type"] != "AdamW" && o["type"] != "adamw"))
    r.refuse(p + ".type",
             detail::concat("is ", o.contains("type") ? value_shown(o["type"]) : "missing",
                            ": snug maps only \"AdamW\" (to --optim adamw_torch); "
                            "for another optimizer leave the block out and give "
                            "--optim"));
  if (given.count("optim") != 0 && a.optim != "adamw_torch" && a.optim != "adamw")
    r.refuse(p + ".type", detail::concat("is AdamW, but the command line gives --optim ", a.optim,
                                         " (drop one, or make them agree)"));
  if (a.optim != "adamw") a.optim = "adamw_torch";
  if (!o.contains("params")) return;
  const std::string q = p + ".params";
  const json& ps = o["params"];
  r.keys(ps, q, {"lr", "betas", "eps", "weight_decay"});
  if (ps.contains("lr"))
    r.set_double(ps["lr"], q + ".lr", &TA::learning_rate, "learning_rate", 0, 1e6);
  if (ps.contains("eps"))
    r.set_double(ps["eps"], q + ".eps", &TA::adam_epsilon, "adam_epsilon", 0, 1);
  if (ps.contains("weight_decay"))
    r.set_double(ps["weight_decay"], q + ".weight_decay", &TA::weight_decay, "weight_decay", 0,
                 1e6);
  if (ps.contains("betas")) {
    const json& b = ps["betas"];
    if (Reader::is_auto(b)) return;
    if (!b.is_array() || b.size() != 2)
      r.refuse(q + ".betas",
               detail::concat("must be [beta1, beta2] or \"auto\", got ", value_shown(b)));
    r.set_double(b[0], q + ".betas[0]", &TA::adam_beta1, "adam_beta1", 0, 1);
    r.set_double(b[1], q + ".betas[1]", &TA::adam_beta2, "adam_beta2", 0, 1);
  }
}

}  // namespace

void apply_deepspeed_config(const json& config, const std::string& origin,
                            const std::set<std::string>& explicit_keys, int world_size,
                            TrainingArguments& args) {
  Reader r(origin, explicit_keys, args);
  r.keys(config, "",
         {"zero_optimization", "bf16", "fp16", "gradient_accumulation_steps", "gradient_clipping",
          "train_micro_batch_size_per_gpu", "train_batch_size", "optimizer"});
  if (config.contains("zero_optimization")) read_zero(r, config["zero_optimization"]);
  if (config.contains("bf16")) {
    r.keys(config["bf16"], "bf16", {"enabled"});
    if (config["bf16"].contains("enabled")) {
      const json& e = config["bf16"]["enabled"];
      // --bf16-full and --precision-layout deepspeed compute in bf16 too: they are bf16 runs.
      // bf16.enabled alone sets --bf16 (HF's meaning: fp32 weights and gradients, bf16 compute
      // copies), not DeepSpeed's 16-bit layout: a config file sets only the flags its keys
      // name, so a run's bytes are those of its flags; --precision-layout deepspeed gives the
      // layout (docs/distributed.md).
      if (args.sixteen_bit_training() && e.is_boolean() && !e.get<bool>())
        r.refuse("bf16.enabled", args.bf16_full
                                     ? "is false, but the command line gives --bf16-full"
                                     : "is false, but the command line gives --precision-layout "
                                       "deepspeed (bf16 weights and gradients)");
      if (!args.sixteen_bit_training()) r.set_bool(e, "bf16.enabled", &TA::bf16, "bf16");
    }
  }
  if (config.contains("fp16")) read_fp16(r, config["fp16"]);
  SNUG_CHECK(!(args.bf16 && args.fp16), origin,
             ": bf16 and fp16 are both enabled (with the command line's flags); choose one");
  if (config.contains("gradient_accumulation_steps"))
    r.set_int(config["gradient_accumulation_steps"], "gradient_accumulation_steps",
              &TA::gradient_accumulation_steps, "gradient_accumulation_steps", 1, 1 << 20);
  if (config.contains("gradient_clipping"))
    r.set_double(config["gradient_clipping"], "gradient_clipping", &TA::max_grad_norm,
                 "max_grad_norm", 0, 1e9);
  if (config.contains("train_micro_batch_size_per_gpu"))
    r.set_int(config["train_micro_batch_size_per_gpu"], "train_micro_batch_size_per_gpu",
              &TA::per_device_train_batch_size, "per_device_train_batch_size", 1, 1 << 24);
  if (config.contains("optimizer")) read_optimizer(r, config["optimizer"], args, explicit_keys);
  if (config.contains("train_batch_size")) {
    const json& t = config["train_batch_size"];
    const int64_t want =
        args.per_device_train_batch_size * args.gradient_accumulation_steps * world_size;
    if (!Reader::is_auto(t)) {
      if (!t.is_number_integer() || t.get<int64_t>() < 1)
        r.refuse("train_batch_size",
                 detail::concat("must be a positive integer or \"auto\", got ", value_shown(t)));
      if (t.get<int64_t>() != want)
        r.refuse("train_batch_size",
                 detail::concat("is ", t.get<int64_t>(), ", but micro-batch ",
                                args.per_device_train_batch_size, " x accumulation ",
                                args.gradient_accumulation_steps, " x ", world_size,
                                world_size == 1 ? " rank" : " ranks", " is ", want));
    }
  }
}

void apply_deepspeed_file(const std::set<std::string>& explicit_keys, int world_size,
                          TrainingArguments& args) {
  const std::string origin = "--deepspeed " + excerpt(args.deepspeed);
  const json config =
      parse_json_input(read_input_file(args.deepspeed, origin, int64_t{16} << 20), origin);
  apply_deepspeed_config(config, origin, explicit_keys, world_size, args);
}

}  // namespace snug
