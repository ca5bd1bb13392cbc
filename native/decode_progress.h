// How far a full-resolution decode has got, for a reader on another thread that works on its rows as
// they come (the model's input, resampled behind a JPEG's decode: model_resample.h). The decode
// publishes its buffer once it is allocated, then the count of rows in memory after each strip, and
// says when it ends, failed or not; the reader waits for the rows it needs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace bgone {

class DecodeProgress {
 public:
  struct Image {
    const uint8_t* pixels = nullptr;  // rows of width x bands bytes, in order
    int width = 0, height = 0, bands = 0;
  };

  // The decode's side.
  void start(const Image& image) {
    std::lock_guard<std::mutex> lock(mutex_);
    image_ = image;
    started_ = true;
    changed_.notify_all();
  }
  void publish(int rows) {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_ = rows;
    changed_.notify_all();
  }
  // Called once the decode is over, whatever happened (what it has not published never comes).
  void finish() {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    changed_.notify_all();
  }

  // The reader's side. Waits for the buffer; false if the decode ended without one.
  bool wait_start(Image& image) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return started_ || ended_; });
    image = image_;
    return started_;
  }
  // Waits until at least `rows` rows are in memory; false if the decode ended before.
  bool wait_rows(int rows) {
    if (rows <= known_) return true;  // the reader's own copy: no lock for rows seen before
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this, rows] { return rows_ >= rows || ended_; });
    known_ = rows_;
    return rows_ >= rows;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  Image image_;
  bool started_ = false, ended_ = false;
  int rows_ = 0;
  int known_ = 0;  // read and written by the reader only
};

}  // namespace bgone
