# A Ruby loop for JRuby with invokedynamic (-Xcompile.invokedynamic=true): method calls, blocks,
# object creation and a hash, all dispatched through method handles. Runs until its standard
# input ends.
class Point
  attr_reader :x, :y

  def initialize(x, y)
    @x = x
    @y = y
  end

  def +(other)
    Point.new(@x + other.x, @y + other.y)
  end

  def norm
    Math.sqrt(@x * @x + @y * @y)
  end
end

def work(n)
  acc = Point.new(0, 0)
  seen = {}
  n.times do |i|
    acc += Point.new(i % 7, i % 11)
    seen[i % 1000] = acc.norm.to_i.to_s
  end
  seen.size + acc.x
end

done = false
Thread.new do
  $stdin.read
  done = true
end
sum = 0
sum += work(20_000) until done
puts sum
