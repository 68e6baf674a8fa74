// `tandem run`'s lines on the terminal, elsewhere and in controller.log (run_output.h).
#include "tools/cli/run_output.h"

#include <unistd.h>

#include <iostream>
#include <utility>

#include "actors/bridge/log_line.hpp"
#include "gpu/core/printable.h"
#include "tools/cli/log_timestamp.h"
#include "tools/cli/progress_bar.h"

namespace tandem::cli {
namespace {

std::string printable(const std::string& line) { return gpu::printable(line, std::size_t{1} << 16); }

void put(std::ostream& to, const std::string& text) {
  to.write(text.data(), static_cast<std::streamsize>(text.size()));
  to.flush();
}

// Back to the start of the line, then erase it (ANSI "erase in line", to its end).
constexpr const char* clear_line = "\r\033[K";

}  // namespace

bool is_terminal(const std::ostream& s) {
  if (&s == &std::cout) return ::isatty(STDOUT_FILENO) == 1;
  if (&s == &std::cerr) return ::isatty(STDERR_FILENO) == 1;
  return false;
}

run_output::run_output(std::ostream& out, bool out_terminal, std::ostream& err, bool err_terminal,
                       std::shared_ptr<records::record_file> log, clock now)
    : out_(out), err_(err), out_terminal_(out_terminal), err_terminal_(err_terminal), log_(std::move(log)),
      now_(std::move(now)) {
  if (log_)
    copy_log_lines([this](const std::string& line) {
      // log_line has written the line to stderr already: on a terminal it began where the bar
      // ended and took the cursor to a new line, so no bar is left to erase.
      std::lock_guard<std::mutex> lock(mutex_);
      bar_drawn_ = false;
      (void)log_->append(timestamped(now_(), line));  // a failure stays with the file: the run reads it at its end
    });
}

run_output::~run_output() {
  if (log_) copy_log_lines({});
  std::lock_guard<std::mutex> lock(mutex_);
  erase_bar();
}

void run_output::out(const std::string& line) { write(out_, out_terminal_, line, line); }

void run_output::err(const std::string& line) { write(err_, err_terminal_, line, line); }

void run_output::step(const std::string& compact, const std::string& full) { write(out_, out_terminal_, compact, full); }

void run_output::generation(std::size_t done, std::size_t total) {
  if (!out_terminal_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  put(out_, "\r" + progress_bar(bar_width, done, total) + "\033[K");
  bar_drawn_ = true;
}

void run_output::write(std::ostream& to, bool terminal, const std::string& terminal_text, const std::string& log_text) {
  const std::string logged = timestamped(now_(), printable(log_text));
  std::lock_guard<std::mutex> lock(mutex_);
  erase_bar();
  put(to, (terminal ? printable(terminal_text) : logged) + "\n");
  if (log_) (void)log_->append(logged);
}

void run_output::erase_bar() {
  if (!bar_drawn_) return;
  put(out_, clear_line);
  bar_drawn_ = false;
}

}  // namespace tandem::cli
