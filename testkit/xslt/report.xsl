<!-- A report of testkit's generated orders (userspace/tests/real_programs): orders grouped by
     customer and month, sorted by their totals, the words of each month, the large orders. -->
<xsl:stylesheet version="3.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
<xsl:output method="xml" indent="yes"/>
<xsl:template match="/orders">
  <report>
    <xsl:for-each-group select="order" group-by="@customer">
      <xsl:sort select="sum(current-group()/line/(@qty * @price))" order="descending"/>
      <customer id="{current-grouping-key()}" orders="{count(current-group())}"
                total="{format-number(sum(current-group()/line/(@qty * @price)), '0.00')}">
        <xsl:for-each-group select="current-group()/line" group-by="substring(../@date, 1, 7)">
          <xsl:sort select="current-grouping-key()"/>
          <month key="{current-grouping-key()}" words="{string-join(distinct-values(current-group()/tokenize(., ' ')), ',')}"/>
        </xsl:for-each-group>
      </customer>
    </xsl:for-each-group>
    <xsl:apply-templates select="order[line/@qty &gt; 6]"/>
  </report>
</xsl:template>
<xsl:template match="order">
  <big id="{@id}" text="{upper-case(string-join(line, ' | '))}"/>
</xsl:template>
</xsl:stylesheet>
